-- resettle.lua — a deduction whose ledger row was settled before meets the
-- pending record of its id, if any (doc/money.md, "A request id deducts once": a request id deducts once per
-- user for as long as its ledger row exists, whatever Redis forgot).
--
-- The record is the row's own (same ref) only when Redis came back from a
-- snapshot taken before the row was settled: that snapshot's balance has the
-- deduction taken, so the record is cleared. A record with another ref is a
-- second charge of the id, taken after Redis forgot the first one's marker
-- (its expiry, a loss, a snapshot older than the first charge): it is
-- refunded; so is a record with a ref met by a row without one (written
-- before refs existed: the record came later). A record of an older build
-- has no ref: it is refunded if this Redis settled the row (the record came
-- after), cleared otherwise.
--
-- KEYS[1] agent:balance:{username}
-- KEYS[2] agent:pending:{username}
-- KEYS[3] agent:settled:{username}:D:{id}  set when this Redis settled the row
-- KEYS[4] agent:deduction:{username}:{id}  the idempotency marker, set to the row's (one of the
--         row's own charge, same ref, is kept: it may know the charge's cost)
-- KEYS[5] agent:balance-entries:{username}  raised when the row's own record is cleared: the
--         settle that cleared it before was lost with the newer Redis (a missing count stays missing)
-- ARGV[1] deduction id
-- ARGV[2] the row's ref ("" unknown)
-- ARGV[3] the row's marker value "deducted|ref|hash"
-- ARGV[4] marker TTL, seconds
-- Returns "NONE" (no pending record), "CLEARED", "REFUNDED|amount", or "-2"
-- (the balance or the record is malformed: nothing changed).
-- The decimal arithmetic is lib/money.lua's, prepended by store/scripts.go.

local ttl = tonumber(ARGV[4])

-- setMarker sets the idempotency marker to the row's charge. A marker of
-- that same charge (its ref) is kept, its life renewed: deduct.lua wrote it
-- with the charge's cost, which the row does not know.
local function setMarker()
  if ARGV[2] ~= '' then
    local cur = redis.call('GET', KEYS[4])
    if cur and string.match(cur, '^[^|]*|([^|]*)') == ARGV[2] then
      redis.call('EXPIRE', KEYS[4], ttl)
      return
    end
  end
  redis.call('SET', KEYS[4], ARGV[3], 'EX', ttl)
end

local rec = redis.call('HGET', KEYS[2], ARGV[1])
if not rec then
  setMarker()
  return 'NONE'
end
local amount, ref = string.match(rec, '^([^|]*)|[^|]*|?([^|]*)')
local own
if ref ~= '' and ARGV[2] ~= '' then
  own = ref == ARGV[2]
elseif ref ~= '' then
  -- The row has no ref (written before refs existed): a record that has
  -- one was drawn after it, by another charge.
  own = false
else
  own = redis.call('EXISTS', KEYS[3]) == 0
end

if own then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('SET', KEYS[3], 'cleared', 'EX', ttl)
  setMarker()
  if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('INCR', KEYS[5]) end
  return 'CLEARED'
end

local aw, af = parse(amount)
if aw == nil then
  return '-2'
end
local bal = redis.call('GET', KEYS[1])
if bal then
  -- A missing balance is initialised from MySQL, which never had this
  -- charge: removing the record is the whole refund then.
  local bw, bf = parse(bal)
  if bw == nil then
    return '-2'
  end
  redis.call('SET', KEYS[1], fmt(add(bw, bf, aw, af)))
end
redis.call('HDEL', KEYS[2], ARGV[1])
setMarker()
return 'REFUNDED|' .. amount
