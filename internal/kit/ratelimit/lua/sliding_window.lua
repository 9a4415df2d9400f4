-- sliding_window.lua — a sliding-window limit on a sorted set (doc/keys.md, auth:limit
-- "auth:limit:login:failures:{key}": member = timestamp:nano, score = timestamp).
--
-- KEYS[1] the window's sorted set
-- ARGV[1] now, epoch milliseconds
-- ARGV[2] window, milliseconds
-- ARGV[3] limit: events allowed within the window
-- ARGV[4] member to add (unique per event, e.g. "now:nanos")
-- Returns {allowed (1|0), events in the window after this one, retry after (ms, 0 when allowed)}.
-- A refused event is not recorded, so a client that keeps trying is not
-- locked out for longer than the window.

local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local retry = window
  if oldest[2] then
    retry = tonumber(oldest[2]) + window - now
  end
  if retry < 1 then retry = 1 end
  return { 0, count, retry }
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return { 1, count + 1, 0 }
