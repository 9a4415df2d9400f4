-- incr_window.lua — the fixed-window limit the Spring MiniGameScoreService uses.
-- The TTL is set on the first increment only, so later requests do not extend
-- the window; a counter found without a TTL gets one, so it cannot block forever.
--
-- KEYS[1] the counter
-- ARGV[1] window, seconds
-- Returns {count after the increment, milliseconds until the window resets}.

local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  pttl = tonumber(ARGV[1]) * 1000
end
return { count, pttl }
