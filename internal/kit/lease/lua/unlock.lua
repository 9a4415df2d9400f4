-- unlock.lua — compare-and-delete release of a SETNX lock (the Spring
-- "Distributed Locks": only the holder, who knows the UUID, may release).
--
-- KEYS[1] the lock
-- ARGV[1] the holder's token (UUID)
-- Returns 1 released, 0 not held by this token (expired, or another holder's).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
