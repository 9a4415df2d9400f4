-- settle.lua — makes the Redis balance reflect one ledger entry that MySQL
-- just committed (doc/money.md), exactly once.
--
-- First: does this Redis reflect the entry already? It does if it settled
-- it before (its settled marker) or if its balance was initialised from a
-- MySQL read that included it (the entry's seq is at most the read's).
-- Then a pending record of the id can only be a later charge of the same
-- id, taken after its marker was lost: a second charge, refunded.
-- Otherwise a deduction taken by deduct.lua is already in the balance and
-- has a pending record: the record is removed. A deduction whose pending
-- record is gone (Redis lost its data after it) or a recharge is applied to
-- the balance. While the balance is missing the entry waits in the late
-- hash for init_balance.lua.
--
-- KEYS[1] agent:balance:{username}
-- KEYS[2] agent:pending:{username}
-- KEYS[3] agent:balance-init:{username}  "ledgerSeq|ms" of the last initialisation
-- KEYS[4] agent:balance-late:{username}
-- KEYS[5] agent:settled:{username}:{kind}:{entryId}  marker: this entry was settled
-- KEYS[6] agent:deduction:{username}:{entryId}  for a deduction: its idempotency marker, set
--         if missing (Redis lost it), so a client retrying the request is not charged again
-- KEYS[7] agent:balance-entries:{username}  raised when the balance comes to reflect the entry
--         now (CLEARED, APPLIED); an initialisation counts what it read and what it applies.
--         A count that is missing stays missing (unknown: the balance was set by someone else)
-- ARGV[1] kind: D (deduction) or C (credit)
-- ARGV[2] entry id (for a deduction: the deduction id of the pending hash)
-- ARGV[3] amount the ledger applied (positive decimal, 8 places)
-- ARGV[4] the entry's agent_ledger seq (per user, in commit order)
-- ARGV[5] marker TTL, seconds
-- ARGV[6] now, epoch ms (kept with a late entry)
-- ARGV[7] for a deduction: its marker's value, "deducted|ref|hash" (deducted: what the hot balance took)
-- Returns "CLEARED" (pending record removed), "SETTLED" (settled before),
--         "LATE" (balance missing: kept for the initialisation),
--         "INCLUDED" (the initialisation read it), "APPLIED|balance|uncovered",
--         "REFUNDED|amount" (reflected already; a second charge of the id refunded),
--         or "-2". uncovered is the part of a deduction the balance could not
--         take (it stops at zero): after a Redis loss the restored balance
--         does not know deductions still in flight, and may be spent before
--         they land.
-- The decimal arithmetic is lib/money.lua's, prepended by store/scripts.go.

local ttl = tonumber(ARGV[5])
local aw, af = parse(ARGV[3])
local id = tonumber(ARGV[4])
if aw == nil or id == nil or (ARGV[1] ~= 'D' and ARGV[1] ~= 'C') then
  return '-2'
end

local reflected
if redis.call('EXISTS', KEYS[5]) == 1 then
  reflected = 'SETTLED'
else
  local init = redis.call('GET', KEYS[3])
  local read = init and tonumber(string.match(init, '^(%d+)'))
  if read and id <= read then
    reflected = 'INCLUDED'
  end
end

if ARGV[1] == 'D' then
  local rec = redis.call('HGET', KEYS[2], ARGV[2])
  if rec and reflected then
    local amount = string.match(rec, '^([^|]*)')
    local rw, rf = parse(amount)
    local bal = redis.call('GET', KEYS[1])
    local bw, bf = parse(bal)
    if rw == nil or (bal and bw == nil) then
      return '-2'
    end
    if bal then -- a missing balance is initialised from MySQL, which never had this charge
      redis.call('SET', KEYS[1], fmt(add(bw, bf, rw, rf)))
    end
    redis.call('HDEL', KEYS[2], ARGV[2])
    redis.call('SET', KEYS[5], string.lower(reflected), 'EX', ttl)
    redis.call('SET', KEYS[6], ARGV[7], 'EX', ttl) -- the row's charge answers retries now
    return 'REFUNDED|' .. amount
  end
  redis.call('SET', KEYS[6], ARGV[7], 'NX', 'EX', ttl)
  if rec then
    redis.call('HDEL', KEYS[2], ARGV[2])
    redis.call('SET', KEYS[5], 'cleared', 'EX', ttl)
    if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('INCR', KEYS[7]) end
    return 'CLEARED'
  end
end
if reflected == 'SETTLED' then
  return 'SETTLED'
end
if reflected == 'INCLUDED' then
  redis.call('SET', KEYS[5], 'included', 'EX', ttl)
  return 'INCLUDED'
end
local bal = redis.call('GET', KEYS[1])
if bal == false then
  redis.call('HSET', KEYS[4], ARGV[1] .. ':' .. ARGV[2], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ARGV[6])
  redis.call('SET', KEYS[5], 'late', 'EX', ttl)
  return 'LATE'
end
local bw, bf = parse(bal)
if bw == nil then
  return '-2'
end
local uw, uf = 0, 0
if ARGV[1] == 'C' then
  bw, bf = add(bw, bf, aw, af)
else
  bw, bf, uw, uf = take(bw, bf, aw, af)
end
bal = fmt(bw, bf)
redis.call('SET', KEYS[1], bal)
redis.call('SET', KEYS[5], 'applied', 'EX', ttl)
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('INCR', KEYS[7]) end
return 'APPLIED|' .. bal .. '|' .. fmt(uw, uf)
