-- cache_fill.lua — the fill of a cache-aside key that a writer may have
-- fenced: the writer replaces the key with "__STALE__|version" when it
-- changes the row, and a reader that read the row before that change (an
-- older version) must not write its stale copy back.
--
-- KEYS[1] the cache key
-- ARGV[1] the value to cache
-- ARGV[2] the version of the row it was read from (e.g. updated_at in µs; 0 = no row)
-- ARGV[3] TTL, milliseconds
-- Returns 1 filled, 0 refused (a newer write fenced the key).

local cur = redis.call('GET', KEYS[1])
if cur then
  local fence = string.match(cur, '^__STALE__|(%d+)$')
  if fence and tonumber(fence) > tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
