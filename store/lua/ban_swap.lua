-- ban_swap.lua — puts a ban list rebuilt from MySQL in place of Redis's,
-- unless Redis's generation changed while it was being built (a ban came
-- in, or another process rebuilt it first).
-- KEYS[1] user:ban:bloom   KEYS[2] user:ban:set   KEYS[3] user:ban:generation
-- KEYS[4] the rebuilt bitmap   KEYS[5] the rebuilt set (both missing: no bans)
-- ARGV[1] the generation Redis held when the rebuild began ("" = none)
-- ARGV[2] MySQL's generation the rebuilt list was read at
-- Returns 1 replaced, 0 left alone. The rebuilt keys are gone either way.

local cur = redis.call('GET', KEYS[3]) or ''
if cur ~= ARGV[1] then
  redis.call('DEL', KEYS[4], KEYS[5])
  return 0
end
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[i + 3]) == 1 then
    redis.call('RENAME', KEYS[i + 3], KEYS[i])
    redis.call('PERSIST', KEYS[i])
  else
    redis.call('DEL', KEYS[i])
  end
end
redis.call('SET', KEYS[3], ARGV[2])
return 1
