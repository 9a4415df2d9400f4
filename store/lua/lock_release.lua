-- lock_release.lua — release a lock taken with SET NX PX and a random
-- token (seed 000, DB 10: payment locks hold a UUID), only if it is still
-- the holder's: a lock that expired and was taken by someone else keeps
-- its new holder.
--
-- KEYS[1] the lock, e.g. payment:lock:create:{product}:{username}
-- ARGV[1] the token the holder set
-- Returns 1 when the lock was deleted, 0 when it held another token or
-- none.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
