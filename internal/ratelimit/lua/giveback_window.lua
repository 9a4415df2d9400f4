-- giveback_window.lua — gives back one request counted by incr_window.lua,
-- for a limit that counts only the requests it ends up accepting. A count
-- left above zero keeps its TTL (DECR does not touch it); a count that
-- would reach zero is deleted, so a window nothing was accepted in leaves
-- no key, and the next accepted request starts a window of its own. A
-- counter that expired is left alone: a window that ended is never
-- reopened, nor driven below zero.
--
-- KEYS[1] the counter
-- Returns the count after giving back (0 when deleted), or -1 when there
-- is no counter.

local n = tonumber(redis.call('GET', KEYS[1]))
if n == nil then
  return -1
end
if n <= 1 then
  redis.call('DEL', KEYS[1])
  return 0
end
return redis.call('DECR', KEYS[1])
