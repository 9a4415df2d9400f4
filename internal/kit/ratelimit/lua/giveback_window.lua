-- giveback_window.lua — gives back one request counted by incr_window.lua,
-- for a limit that counts only the requests it ends up accepting, to the
-- window it was counted in and no other: the counter must still end when
-- that window ends (its expiry, incr_window.lua's third value) and the
-- caller's clock must still be before that end. A count taken in a window
-- that ended is given back to no window: were it given to the next one,
-- that window would let one request more through than its limit. A count
-- left above zero keeps its expiry (DECR does not touch it); a count that
-- would reach zero is deleted, so a window nothing was accepted in leaves
-- no key, and the next accepted request starts a window of its own.
--
-- KEYS[1] the counter
-- ARGV[1] the end of the window the request was counted in, epoch milliseconds
-- ARGV[2] now, epoch milliseconds ("" = the Redis server's clock)
-- Returns the count after giving back (0 when deleted), or -1 when the
-- window it was counted in is over (nothing given back).

local ends = redis.call('PEXPIRETIME', KEYS[1])
if ends < 0 or ends ~= tonumber(ARGV[1]) then
  return -1
end
local now = tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if ends <= now then
  return -1
end
local n = tonumber(redis.call('GET', KEYS[1]))
if n == nil then
  return -1
end
if n <= 1 then
  redis.call('DEL', KEYS[1])
  return 0
end
return redis.call('DECR', KEYS[1])
