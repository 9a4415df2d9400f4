-- deduct.lua — seed 000 "Lua Deduction Script" (cap at zero), with exact
-- decimal arithmetic and an idempotency record (SPEC 6).
--
-- Balances are decimal strings with 8 places ("1234.56789012"). Lua numbers are
-- doubles, so the script never converts a balance to one number: it keeps the
-- whole fen and the 8 fractional digits as two integers, exact up to 15 whole digits.
--
-- KEYS[1] agent:balance:{username}   decimal string
-- KEYS[2] agent:pending:{username}   hash: deduction id -> "deducted|nowMs"
-- KEYS[3] agent:deduction:{username}:{id}  the amount the first run deducted, expires after ARGV[4] s
--         (init_balance.lua restores the markers of recent deductions after a Redis loss)
-- ARGV[1] amount: decimal string, up to 8 places, more than zero
-- ARGV[2] deduction id
-- ARGV[3] now, epoch milliseconds
-- ARGV[4] TTL of KEYS[3], seconds
-- Returns "-1" balance missing (initialise it with SETNX, then run again),
--         "-2" balance or amount malformed (nothing changed),
--         "-3" balance is zero (refused),
--         "OK|newBal|deducted" deducted min(balance, amount) now,
--         "DUP|balance|deducted" this id ran before: nothing changed; the current balance
--         and what the first run deducted are returned.

local function parse(s)
  if type(s) ~= 'string' then return nil end
  local w, f = string.match(s, '^(%d+)%.?(%d*)$')
  if w == nil or #w > 15 or #f > 8 then return nil end
  return tonumber(w), tonumber(f .. string.rep('0', 8 - #f))
end

local function fmt(w, f)
  return string.format('%d.%08d', w, f)
end

local done = redis.call('GET', KEYS[3])
if done then
  local now = redis.call('GET', KEYS[1])
  return 'DUP|' .. (now or '0.00000000') .. '|' .. done
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
if bw < aw or (bw == aw and bf < af) then
  dw, df = bw, bf
end
local nw, nf = bw - dw, bf - df
if nf < 0 then
  nw, nf = nw - 1, nf + 100000000
end

redis.call('SET', KEYS[1], fmt(nw, nf))
redis.call('HSET', KEYS[2], ARGV[2], fmt(dw, df) .. '|' .. ARGV[3])
redis.call('SET', KEYS[3], fmt(dw, df), 'EX', tonumber(ARGV[4]))
return 'OK|' .. fmt(nw, nf) .. '|' .. fmt(dw, df)
