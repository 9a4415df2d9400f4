-- incr_window.lua — the fixed-window limit the Spring MiniGameScoreService uses.
-- The window starts at the first increment and ends a window later, as the
-- counter's expiry (PEXPIREAT) records: later requests do not extend it; a
-- counter found without an expiry gets one, so it cannot block forever. The
-- end is the window's identity: giveback_window.lua gives a count back only
-- to the window it was taken in. The clock is the caller's (ARGV[2]), so a
-- counter whose window ended by it is a new window even before Redis
-- drops it.
--
-- KEYS[1] the counter
-- ARGV[1] window, milliseconds
-- ARGV[2] now, epoch milliseconds ("" = the Redis server's clock)
-- Returns {count after the increment, milliseconds until the window ends,
-- the window's end (epoch milliseconds)}.

local now = tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local ends = redis.call('PEXPIRETIME', KEYS[1])
if ends >= 0 and ends <= now then
  redis.call('DEL', KEYS[1])
  ends = -2
end
local count = redis.call('INCR', KEYS[1])
if ends < 0 then
  ends = now + tonumber(ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], ends)
end
return { count, ends - now, ends }
