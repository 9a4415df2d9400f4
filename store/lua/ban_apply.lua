-- ban_apply.lua — one ban or unban, as MySQL's user_ban just committed it
-- at ban generation ARGV[3].
-- KEYS[1] user:ban:bloom   KEYS[2] user:ban:set   KEYS[3] user:ban:generation
-- ARGV[1] "1" ban, "0" unban     ARGV[2] username
-- ARGV[3] the change's generation   ARGV[4] the generation before it
-- ARGV[5..] Bloom bit offsets of the username (ban only)
-- Returns 1 when Redis held the generation before and now holds this one;
-- 0 when it did not (it lost changes, went back in time, or a concurrent
-- change came first): the change is applied anyway, and the generation
-- left as it was, so the API's check rebuilds the list from MySQL.

if ARGV[1] == '1' then
  for i = 5, #ARGV do
    redis.call('SETBIT', KEYS[1], ARGV[i], 1)
  end
  redis.call('SADD', KEYS[2], ARGV[2])
else
  redis.call('SREM', KEYS[2], ARGV[2])
end
if redis.call('GET', KEYS[3]) == ARGV[4] then
  redis.call('SET', KEYS[3], ARGV[3])
  return 1
end
return 0
