-- token_bucket.lua — the token bucket the Spring SliderCaptchaService uses.
--
-- KEYS[1] the bucket: hash with fields tokens, ts
-- ARGV[1] now, epoch milliseconds ("" = the Redis server's clock, so callers' clocks cannot skew it)
-- ARGV[2] capacity
-- ARGV[3] refill per millisecond (capacity / window seconds / 1000)
-- ARGV[4] tokens requested
-- ARGV[5] key TTL, seconds (max(30, window seconds * 2))
-- Returns {allowed (1|0), remaining tokens (floored), retry after (ms, 0 when allowed)}.

local now_ms = tonumber(ARGV[1])
if now_ms == nil then
  local t = redis.call('TIME')
  now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local capacity = tonumber(ARGV[2])
local refill_per_ms = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])
local ttl_seconds = tonumber(ARGV[5])

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now_ms

local elapsed = now_ms - ts
if elapsed < 0 then
  elapsed = 0
end
tokens = math.min(capacity, tokens + elapsed * refill_per_ms)

local allowed = 0
local retry_after_ms = 0
if tokens >= requested then
  tokens = tokens - requested
  allowed = 1
else
  retry_after_ms = math.ceil((requested - tokens) / refill_per_ms)
end

redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now_ms)
redis.call('EXPIRE', KEYS[1], ttl_seconds)
return { allowed, math.floor(tokens), retry_after_ms }
