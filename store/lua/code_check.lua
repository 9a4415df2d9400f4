-- code_check.lua — check an email verification code against its HMAC
-- (doc/keys.md, database 2): the code is used up by a match, and locked after the
-- allowed number of wrong attempts.
--
-- KEYS[1] verify:code:{scene}:{email}
-- KEYS[2] verify:attempts:{scene}:{email}
-- ARGV[1] the HMAC of the code sent (hex)
-- ARGV[2] wrong attempts allowed
-- Returns {"OK", 0} (matched; code and attempts deleted), {"NONE", 0} (no
-- code, or it expired), {"LOCKED", 0} (no attempts left), or {"WRONG",
-- attempts left}.

local stored = redis.call('GET', KEYS[1])
if not stored then return { 'NONE', 0 } end
local max = tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
if used >= max then return { 'LOCKED', 0 } end
if stored == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return { 'OK', 0 }
end
used = redis.call('INCR', KEYS[2])
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 then redis.call('PEXPIRE', KEYS[2], pttl) end
if used >= max then return { 'LOCKED', 0 } end
return { 'WRONG', max - used }
