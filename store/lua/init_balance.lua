-- init_balance.lua — the Spring backend's balance initialisation (SETNX from MySQL),
-- recording what the initialisation read (doc/money.md, "After a Redis loss").
--
-- After Redis lost its data, a balance is initialised from MySQL. Entries
-- that MySQL committed after that read (ledger seq > ARGV[2]) are not in it:
-- when they land they are applied to Redis by settle.lua, which compares
-- their ledger seq with the one recorded here. Entries applied while the
-- balance was missing wait in the late hash and are applied here.
--
-- KEYS[1] agent:balance:{username}
-- KEYS[2] agent:balance-init:{username}  "ledgerSeq|nowMs" of the read
-- KEYS[3] agent:balance-late:{username}  hash: entry -> "kind|amount|seq|ms", kind D or C
-- KEYS[4] agent:balance-entries:{username}  the ledger entries the balance reflects: the read's
--         hot_entries plus the late entries applied here
-- ARGV[1] balance read from MySQL (decimal, 8 places, >= 0)
-- ARGV[2] the user_account.ledger_seq of that read (0 = none)
-- ARGV[3] now, epoch ms
-- ARGV[5] the user_account.hot_entries of that read
-- KEYS[5..] agent:deduction:{username}:{id} markers of the user's recent deductions,
-- ARGV[6..] their values ("deducted|ref|hash"), and ARGV[4] the markers' TTL in seconds: a Redis
--           loss wiped them, and without them a client retrying such a request would be charged again.
-- Returns "EXISTS" (someone initialised it first; nothing changed),
--         "-2" malformed input, or "INIT|balance" (the balance set).
-- The decimal arithmetic is lib/money.lua's, prepended by store/scripts.go.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 'EXISTS'
end
local bw, bf = parse(ARGV[1])
local read = tonumber(ARGV[2])
local entries = tonumber(ARGV[5])
if bw == nil or read == nil or entries == nil then
  return '-2'
end

local late = redis.call('HGETALL', KEYS[3])
for i = 1, #late, 2 do
  local kind, amount, id = string.match(late[i + 1], '^(%a)|([%d%.]+)|(%d+)')
  local aw, af = parse(amount)
  if kind and aw and tonumber(id) > read then
    entries = entries + 1
    if kind == 'C' then
      bw, bf = add(bw, bf, aw, af)
    else
      bw, bf = take(bw, bf, aw, af)
    end
  end
end
redis.call('DEL', KEYS[3])

local bal = fmt(bw, bf)
redis.call('SET', KEYS[1], bal)
redis.call('SET', KEYS[2], ARGV[2] .. '|' .. ARGV[3])
redis.call('SET', KEYS[4], entries)
for i = 5, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 1], 'NX', 'EX', tonumber(ARGV[4]))
end
return 'INIT|' .. bal
