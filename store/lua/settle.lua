-- settle.lua — makes the Redis balance reflect one ledger entry that MySQL
-- just committed (SPEC 6), exactly once.
--
-- A deduction taken by deduct.lua is already in the balance and has a
-- pending entry: that entry is removed. A deduction whose pending entry is
-- gone (Redis lost its data after it) or a recharge is applied to the
-- balance, unless the balance was initialised from a MySQL read that already
-- included the entry. While the balance is missing the entry waits in the
-- late hash for init_balance.lua.
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
-- Returns "CLEARED" (pending entry removed), "SETTLED" (settled before),
--         "LATE" (balance missing: kept for the initialisation),
--         "INCLUDED" (the initialisation read it), "APPLIED|balance|uncovered",
--         or "-2". uncovered is the part of a deduction the balance could not
--         take (it stops at zero): after a Redis loss the restored balance
--         does not know deductions still in flight, and may be spent before
--         they land.

local function parse(s)
  if type(s) ~= 'string' then return nil end
  local w, f = string.match(s, '^(%d+)%.?(%d*)$')
  if w == nil or #w > 15 or #f > 8 then return nil end
  return tonumber(w), tonumber(f .. string.rep('0', 8 - #f))
end

local ttl = tonumber(ARGV[5])
if ARGV[1] == 'D' then
  redis.call('SET', KEYS[6], ARGV[7], 'NX', 'EX', ttl)
end
if ARGV[1] == 'D' and redis.call('HDEL', KEYS[2], ARGV[2]) == 1 then
  redis.call('SET', KEYS[5], 'cleared', 'EX', ttl)
  if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('INCR', KEYS[7]) end
  return 'CLEARED'
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return 'SETTLED'
end
local aw, af = parse(ARGV[3])
local id = tonumber(ARGV[4])
if aw == nil or id == nil or (ARGV[1] ~= 'D' and ARGV[1] ~= 'C') then
  return '-2'
end
local bal = redis.call('GET', KEYS[1])
if bal == false then
  redis.call('HSET', KEYS[4], ARGV[1] .. ':' .. ARGV[2], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ARGV[6])
  redis.call('SET', KEYS[5], 'late', 'EX', ttl)
  return 'LATE'
end
local init = redis.call('GET', KEYS[3])
if init then
  local read = tonumber(string.match(init, '^(%d+)'))
  if read and id <= read then
    redis.call('SET', KEYS[5], 'included', 'EX', ttl)
    return 'INCLUDED'
  end
end
local bw, bf = parse(bal)
if bw == nil then
  return '-2'
end
local uw, uf = 0, 0
if ARGV[1] == 'C' then
  bw, bf = bw + aw, bf + af
  if bf >= 100000000 then bw, bf = bw + 1, bf - 100000000 end
elseif bw > aw or (bw == aw and bf >= af) then
  bw, bf = bw - aw, bf - af
  if bf < 0 then bw, bf = bw - 1, bf + 100000000 end
else
  uw, uf = aw - bw, af - bf
  if uf < 0 then uw, uf = uw - 1, uf + 100000000 end
  bw, bf = 0, 0
end
bal = string.format('%d.%08d', bw, bf)
redis.call('SET', KEYS[1], bal)
redis.call('SET', KEYS[5], 'applied', 'EX', ttl)
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('INCR', KEYS[7]) end
return 'APPLIED|' .. bal .. '|' .. string.format('%d.%08d', uw, uf)
