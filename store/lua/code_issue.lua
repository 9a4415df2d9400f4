-- code_issue.lua — issue an email verification code (doc/keys.md, database 2), or
-- say which limit refuses it. Every check comes before any change, so a
-- refused request counts against no limit; then the counters go up, the
-- code's hash replaces any earlier one with a fresh attempt count, and the
-- cooldown starts, all at once.
--
-- KEYS[1] verify:code:{scene}:{email}       the code's HMAC
-- KEYS[2] verify:attempts:{scene}:{email}   wrong attempts on it
-- KEYS[3] verify:cooldown:{scene}:{email}
-- KEYS[4] verify:rate:ip:{ip}
-- KEYS[5] verify:rate:email:hour:{email}
-- KEYS[6] verify:rate:email:day:{email}
-- ARGV[1] the code's HMAC (hex)
-- ARGV[2] code TTL, ms          ARGV[3] cooldown, ms
-- ARGV[4] IP limit              ARGV[5] IP window, ms
-- ARGV[6] hourly limit          ARGV[7] hour window, ms
-- ARGV[8] daily limit           ARGV[9] ms to the end of the day (UTC+8)
-- Returns {"OK", 0}, or {limit, ms until it lifts} with limit one of
-- "cooldown", "ip", "email-hour", "email-day".

local function over(key, limit)
  local n = tonumber(redis.call('GET', key) or '0')
  if n >= tonumber(limit) then
    local pttl = redis.call('PTTL', key)
    if pttl < 0 then pttl = 1000 end
    return pttl
  end
  return nil
end

local pttl = redis.call('PTTL', KEYS[3])
if pttl > 0 then return { 'cooldown', pttl } end
local checks = { { KEYS[4], ARGV[4], 'ip' }, { KEYS[5], ARGV[6], 'email-hour' }, { KEYS[6], ARGV[8], 'email-day' } }
for _, c in ipairs(checks) do
  local wait = over(c[1], c[2])
  if wait then return { c[3], wait } end
end

local windows = { { KEYS[4], ARGV[5] }, { KEYS[5], ARGV[7] }, { KEYS[6], ARGV[9] } }
for _, w in ipairs(windows) do
  if redis.call('INCR', w[1]) == 1 or redis.call('PTTL', w[1]) < 0 then
    redis.call('PEXPIRE', w[1], w[2])
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])
return { 'OK', 0 }
