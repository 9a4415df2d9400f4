-- score_claim.lua — claims a user's submit id and the session its run was
-- played in, both or neither: a session is used up by its first accepted
-- score. Two runs submitted at once on one session race here, and one
-- wins. The claim is undone by score_release.lua when the run's message
-- cannot be published, so the session is used by an accepted run only.
-- A submit id is its user's: another user's claim of the same id is no
-- claim on it. An earlier API claimed ids in one key per id, whoever sent
-- them (KEYS[4]); such a claim still holds while it lives, for its own
-- user only: its acceptance (JSON) names the user and the id.
--
-- KEYS[1] mg:score:claim:{userId}:{submitId}                   STRING the acceptance
-- KEYS[2] mg:score:session:{gameId}:{userId}:{sessionId}       STRING seed:startedAt
-- KEYS[3] mg:score:session-used:{gameId}:{userId}:{sessionId}  STRING the acceptance
-- KEYS[4] mg:score:idempotency:{submitId}                      STRING an earlier API's acceptance (read only)
-- ARGV[1] the acceptance (JSON)  ARGV[2] submit id TTL, seconds
-- ARGV[3] session TTL, milliseconds (when the session has none)
-- ARGV[4] user id  ARGV[5] submit id
-- Returns {0, acceptance} claimed; {1, first acceptance} the user claimed
-- the submit id before; {2, acceptance} the session is used, by that run;
-- {3, ""} the session is gone (expired).

local first = redis.call('GET', KEYS[1])
if first then
  return {1, first}
end
local earlier = redis.call('GET', KEYS[4])
if earlier then
  local ok, prev = pcall(cjson.decode, earlier)
  if ok and type(prev) == 'table' and prev.userId == tonumber(ARGV[4]) and prev.submitId == ARGV[5] then
    return {1, earlier}
  end
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
