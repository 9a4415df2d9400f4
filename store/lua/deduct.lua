-- deduct.lua — the Spring backend's deduction (cap at zero), with exact
-- decimal arithmetic and an idempotency record (doc/money.md).
--
-- Balances are decimal strings with 8 places, never doubles: the arithmetic
-- is lib/money.lua's, which store/scripts.go prepends to this script.
--
-- KEYS[1] agent:balance:{username}   decimal string
-- KEYS[2] agent:pending:{username}   hash: deduction id -> "deducted|nowMs|ref|hash|usage"
-- KEYS[3] agent:deduction:{username}:{id}  marker "deducted|ref|hash" of the first run, expires
--         after ARGV[4] s (init_balance.lua restores the markers of recent deductions after a Redis
--         loss; a marker of an older build holds only "deducted"); while the marker is missing, the
--         id's pending record answers for it
-- ARGV[1] amount: decimal string, up to 8 places, more than zero
-- ARGV[2] deduction id
-- ARGV[3] now, epoch milliseconds
-- ARGV[4] TTL of KEYS[3], seconds
-- ARGV[5] ref: a nonce the caller draws for this charge (no "|")
-- ARGV[6] hash of the request's body ("" = do not compare)
-- ARGV[7] usage to keep with the pending record: "model|input|cached|output|reasoning|costMicroFen"
-- Returns "-1" balance missing (initialise it with SETNX, then run again),
--         "-2" balance or amount malformed (nothing changed),
--         "-3" balance is zero (refused),
--         "OK|newBal|deducted" deducted min(balance, amount) now,
--         "DUP|balance|deducted|ref" this id ran before with this body (or a body of unknown
--         hash): nothing changed; the current balance, what the first run deducted and its ref,
--         "CONFLICT|deducted" this id ran before with another body: nothing changed.

-- The marker, or while the deduction is pending its record, proves an
-- earlier run: the marker may be gone (expired while the record waited, or
-- deleted), and a second run must not take the money again nor overwrite
-- the record.
local done = redis.call('GET', KEYS[3])
local deducted, ref, hash
if done then
  deducted, ref, hash = string.match(done, '^([^|]*)|?([^|]*)|?([^|]*)')
else
  local rec = redis.call('HGET', KEYS[2], ARGV[2])
  if rec then
    deducted, ref, hash = string.match(rec, '^([^|]*)|[^|]*|?([^|]*)|?([^|]*)')
  end
end
if deducted then
  if hash ~= '' and ARGV[6] ~= '' and hash ~= ARGV[6] then
    return 'CONFLICT|' .. deducted
  end
  local now = redis.call('GET', KEYS[1])
  return 'DUP|' .. (now or '0.00000000') .. '|' .. deducted .. '|' .. ref
end

local bal = redis.call('GET', KEYS[1])
if bal == false then
  return '-1'
end
local bw, bf = parse(bal)
local aw, af = parse(ARGV[1])
if bw == nil or aw == nil or (aw == 0 and af == 0) then
  return '-2'
end
if bw == 0 and bf == 0 then
  return '-3'
end

-- deducted = min(balance, amount)
local dw, df = aw, af
if less(bw, bf, aw, af) then
  dw, df = bw, bf
end
local nw, nf = sub(bw, bf, dw, df)

local ded = fmt(dw, df)
redis.call('SET', KEYS[1], fmt(nw, nf))
redis.call('HSET', KEYS[2], ARGV[2], ded .. '|' .. ARGV[3] .. '|' .. ARGV[5] .. '|' .. ARGV[6] .. '|' .. ARGV[7])
redis.call('SET', KEYS[3], ded .. '|' .. ARGV[5] .. '|' .. ARGV[6], 'EX', tonumber(ARGV[4]))
return 'OK|' .. fmt(nw, nf) .. '|' .. ded
