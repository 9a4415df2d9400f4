-- lib/money.lua — exact decimal money for the scripts that change a balance.
-- store/scripts.go prepends this file to each of them when it loads them:
-- the source Redis runs is this library followed by the script, so the
-- functions below are locals of every such script (and the line numbers in
-- a Redis error count from the top of this file).
--
-- An amount is a decimal string of at most 15 whole digits and 8 places
-- ("1234.56789012"). Lua numbers are doubles, so an amount is never one
-- number: it is kept as whole fen w and the 8 fractional digits f, two
-- integers, each exact (f from 0 to 99999999).

-- parse returns w, f of a decimal string, or nil when s is not one.
local function parse(s)
  if type(s) ~= 'string' then return nil end
  local w, f = string.match(s, '^(%d+)%.?(%d*)$')
  if w == nil or #w > 15 or #f > 8 then return nil end
  return tonumber(w), tonumber(f .. string.rep('0', 8 - #f))
end

-- fmt returns w, f as a decimal string with exactly 8 places.
local function fmt(w, f)
  return string.format('%d.%08d', w, f)
end

-- less tells whether a is less than b.
local function less(aw, af, bw, bf)
  return aw < bw or (aw == bw and af < bf)
end

-- add returns a + b.
local function add(aw, af, bw, bf)
  local w, f = aw + bw, af + bf
  if f >= 100000000 then w, f = w + 1, f - 100000000 end
  return w, f
end

-- sub returns a - b, for a not less than b.
local function sub(aw, af, bw, bf)
  local w, f = aw - bw, af - bf
  if f < 0 then w, f = w - 1, f + 100000000 end
  return w, f
end

-- take takes b from a balance a, which stops at zero. It returns the new
-- balance and the part of b it could not cover (zero when a covered b).
local function take(aw, af, bw, bf)
  if less(aw, af, bw, bf) then
    local uw, uf = sub(bw, bf, aw, af)
    return 0, 0, uw, uf
  end
  local w, f = sub(aw, af, bw, bf)
  return w, f, 0, 0
end
