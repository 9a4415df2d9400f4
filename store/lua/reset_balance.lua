-- reset_balance.lua — drops a hot balance that balance-sync found behind
-- MySQL (doc/money.md, "Redis behind MySQL"), so that the next request or EnsureBalance initialises it
-- from MySQL, with the same rules as after a Redis loss. Only if nothing
-- changed since balance-sync read it and no deduction is pending: a pending
-- deduction is in the balance and not yet in MySQL, so an initialisation
-- would forgive it.
--
-- KEYS[1] agent:balance:{username}
-- KEYS[2] agent:pending:{username}
-- KEYS[3] agent:balance-entries:{username}
-- KEYS[4] agent:balance-init:{username}
-- ARGV[1] the balance as read ("" = missing)
-- ARGV[2] the entry count as read ("" = missing)
-- Returns 1 dropped, 0 changed since read or pending (nothing done).

if redis.call('HLEN', KEYS[2]) > 0 then
  return 0
end
local bal = redis.call('GET', KEYS[1]) or ''
local n = redis.call('GET', KEYS[3]) or ''
if bal ~= ARGV[1] or n ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
return 1
