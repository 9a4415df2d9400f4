-- score_sync.lua — reflects a user's best run, as MySQL holds it, in the
-- game's Redis keys (doc/keys.md, database 14). A run is better than another when its
-- score is higher or, the scores equal, it was achieved first. The script
-- only ever moves the keys to a better run, so syncs that arrive out of
-- order leave the best one, and the leaderboard is touched only while it
-- exists: a missing one is rebuilt from MySQL by the next read
-- (score_board_mark.lua), never started from one player.
--
-- KEYS[1] mg:score:leaderboard:{gameId}        ZSET member=userId score=board score
-- KEYS[2] mg:score:user-meta:{gameId}:{userId} HASH score, durationMs, moves, achievedAt
-- KEYS[3] mg:score:high:{gameId}:{userId}      STRING best score
-- ARGV[1] userId  ARGV[2] score  ARGV[3] durationMs  ARGV[4] moves  ARGV[5] achievedAt
-- ARGV[6] meta TTL, seconds  ARGV[7] high-score TTL, seconds  ARGV[8] leaderboard size
-- ARGV[9] the run's board score (store.BoardScore: the score, plus a fraction
--         that falls as achievedAt rises; exact as a double)
-- Returns 1 when the meta hash took this run, 0 when it holds a better one.

-- Scores are non-negative integers in decimal without leading zeros: compared
-- as text, so values beyond 2^53 (a double's exact range) compare exactly.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

local score = ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('ZADD', KEYS[1], 'GT', ARGV[9], ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[8]) + 1))
end

local high = redis.call('GET', KEYS[3])
if not high or greater(score, high) then
  high = score
end
redis.call('SET', KEYS[3], high, 'EX', ARGV[7])

-- The hash keeps the better run: a higher score, or the same score achieved
-- earlier (epoch milliseconds, exact as Lua numbers).
local cur = redis.call('HMGET', KEYS[2], 'score', 'achievedAt')
if cur[1] and (greater(cur[1], score) or
    (cur[1] == score and (tonumber(cur[2]) or 0) <= tonumber(ARGV[5]))) then
  redis.call('EXPIRE', KEYS[2], ARGV[6])
  return 0
end
redis.call('HSET', KEYS[2], 'score', score, 'durationMs', ARGV[3], 'moves', ARGV[4], 'achievedAt', ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return 1
