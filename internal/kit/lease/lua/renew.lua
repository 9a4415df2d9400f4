-- renew.lua — extends a lease (store.Lease) only for its holder, the
-- compare-and-expire twin of unlock.lua.
--
-- KEYS[1] the lease
-- ARGV[1] the holder's id (UUID)
-- ARGV[2] the new TTL, ms
-- Returns 1 renewed, 0 not held by this holder (expired, or another's).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
