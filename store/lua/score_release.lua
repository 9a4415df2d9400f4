-- score_release.lua — undoes score_claim.lua for a run whose message could
-- not be published: the submit id and the session are free again (the
-- client's retry is accepted), each only while it still holds this run's
-- acceptance.
--
-- KEYS[1] mg:score:claim:{userId}:{submitId}
-- KEYS[2] mg:score:session-used:{gameId}:{userId}:{sessionId}
-- ARGV[1] the acceptance the claim stored
-- Returns how many of the two keys it deleted.

local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    n = n + redis.call('DEL', key)
  end
end
return n
