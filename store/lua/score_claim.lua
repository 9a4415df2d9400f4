-- score_claim.lua — claims a submit id and the session its run was played
-- in, both or neither: a session is used up by its first accepted score. Two
-- runs submitted at once on one session race here, and one wins. The claim
-- is undone by score_release.lua when the run's message cannot be
-- published, so the session is used by an accepted run only.
--
-- KEYS[1] mg:score:idempotency:{submitId}                      STRING the acceptance
-- KEYS[2] mg:score:session:{gameId}:{userId}:{sessionId}       STRING seed:startedAt
-- KEYS[3] mg:score:session-used:{gameId}:{userId}:{sessionId}  STRING the acceptance
-- ARGV[1] the acceptance (JSON)  ARGV[2] submit id TTL, seconds
-- ARGV[3] session TTL, milliseconds (when the session has none)
-- Returns {0, acceptance} claimed; {1, first acceptance} the submit id was
-- claimed before; {2, acceptance} the session is used, by that run;
-- {3, ""} the session is gone (expired).

local first = redis.call('GET', KEYS[1])
if first then
  return {1, first}
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl == -2 then
  return {3, ''}
end
if ttl < 0 then
  ttl = ARGV[3]
end
local used = redis.call('GET', KEYS[3])
if used then
  return {2, used}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[3], ARGV[1], 'PX', ttl)
return {0, ARGV[1]}
