-- deduct.lua — the Spring backend's deduction (cap at zero), with exact
-- decimal arithmetic and an idempotency record (doc/money.md).
--
-- Balances are decimal strings with 8 places, never doubles: the arithmetic
-- is lib/money.lua's, which store/scripts.go prepends to this script.
--
-- KEYS[1] agent:balance:{username}   decimal string
-- KEYS[2] agent:pending:{username}   hash: deduction id -> "deducted|nowMs|ref|hash|usage"
-- KEYS[3] agent:deduction:{username}:{id}  marker "deducted|ref|hash|cost" of the first run, expires
--         after ARGV[4] s (init_balance.lua restores the markers of recent deductions after a Redis
--         loss, without the cost, which the ledger does not keep; a marker of an older build holds
--         only "deducted"); while the marker is missing, the id's pending record answers for it
-- ARGV[1] amount: the request's cost, a decimal string of up to 8 places, zero or more. A zero
--         amount takes nothing and writes no pending record, but holds the id as any charge does
-- ARGV[2] deduction id
-- ARGV[3] now, epoch milliseconds
-- ARGV[4] TTL of KEYS[3], seconds
-- ARGV[5] ref: a nonce the caller draws for this charge (no "|")
-- ARGV[6] hash of the request's body ("" = do not compare)
-- ARGV[7] usage to keep with the pending record: "model|input|cached|output|reasoning|costMicroFen"
-- Returns "-1" balance missing (initialise it with SETNX, then run again),
--         "-2" balance or amount malformed (nothing changed),
--         "-3" balance is zero and the amount is not (refused),
--         "OK|newBal|deducted" deducted min(balance, amount) now,
--         "DUP|balance|deducted|ref|cost" this id ran before with this body (or a body of unknown
--         hash): nothing changed; the current balance, what the first run deducted, its ref and
--         its cost ("" when Redis no longer knows it),
--         "CONFLICT|deducted" this id ran before with another body: nothing changed.

-- The marker, or while the deduction is pending its record, proves an
-- earlier run: the marker may be gone (expired while the record waited, or
-- deleted), and a second run must not take the money again nor overwrite
-- the record.
local done = redis.call('GET', KEYS[3])
local deducted, ref, hash, cost
if done then
  deducted, ref, hash, cost = string.match(done, '^([^|]*)|?([^|]*)|?([^|]*)|?([^|]*)')
else
  local rec = redis.call('HGET', KEYS[2], ARGV[2])
  if rec then
    -- "deducted|now|ref|hash|model|input|cached|output|reasoning|costMicroFen"
    local f = {}
    for v in string.gmatch(rec .. '|', '([^|]*)|') do
      f[#f + 1] = v
    end
    deducted, ref, hash = f[1], f[3] or '', f[4] or ''
    local mf = f[10] and string.match(f[10], '^%d+$')
    if mf then -- micro-fen to a decimal of 8 places
      mf = string.rep('0', 9 - #mf) .. mf
      cost = string.sub(mf, 1, -9) .. '.' .. string.sub(mf, -8)
    end
  end
end
if deducted then
  if hash ~= '' and ARGV[6] ~= '' and hash ~= ARGV[6] then
    return 'CONFLICT|' .. deducted
  end
  local now = redis.call('GET', KEYS[1])
  return 'DUP|' .. (now or '0.00000000') .. '|' .. deducted .. '|' .. ref .. '|' .. (cost or '')
end

local bal = redis.call('GET', KEYS[1])
if bal == false then
  return '-1'
end
local bw, bf = parse(bal)
local aw, af = parse(ARGV[1])
if bw == nil or aw == nil then
  return '-2'
end
local asked = fmt(aw, af)
if aw == 0 and af == 0 then
  -- Nothing to take, but the id is used: the same id again is a replay,
  -- another body a conflict.
  redis.call('SET', KEYS[3], asked .. '|' .. ARGV[5] .. '|' .. ARGV[6] .. '|' .. asked, 'EX', tonumber(ARGV[4]))
  return 'OK|' .. fmt(bw, bf) .. '|' .. asked
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
redis.call('SET', KEYS[3], ded .. '|' .. ARGV[5] .. '|' .. ARGV[6] .. '|' .. asked, 'EX', tonumber(ARGV[4]))
return 'OK|' .. fmt(nw, nf) .. '|' .. ded
