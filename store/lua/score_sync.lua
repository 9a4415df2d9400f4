-- score_sync.lua — reflects a user's best score, as MySQL holds it, in the
-- game's Redis keys (seed 000, DB 14). It only ever moves them forward, so
-- syncs that arrive out of order leave the best run, and the leaderboard is
-- touched only while it exists: a missing one is rebuilt from MySQL by the
-- next read (score_board_mark.lua), never started from one player.
--
-- KEYS[1] mg:score:leaderboard:{gameId}        ZSET member=userId score=best
-- KEYS[2] mg:score:user-meta:{gameId}:{userId} HASH score, durationMs, moves, achievedAt
-- KEYS[3] mg:score:high:{gameId}:{userId}      STRING best score
-- ARGV[1] userId  ARGV[2] score  ARGV[3] durationMs  ARGV[4] moves  ARGV[5] achievedAt
-- ARGV[6] meta TTL, seconds  ARGV[7] high-score TTL, seconds  ARGV[8] leaderboard size
-- Returns 1 when the meta hash took this run, 0 when it holds a better one.

-- Scores are non-negative integers in decimal without leading zeros: compared
-- as text, so values beyond 2^53 (a double's exact range) compare exactly.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

local score = ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('ZADD', KEYS[1], 'GT', score, ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[8]) + 1))
end

local high = redis.call('GET', KEYS[3])
if not high or greater(score, high) then
  high = score
end
redis.call('SET', KEYS[3], high, 'EX', ARGV[7])

local cur = redis.call('HGET', KEYS[2], 'score')
if cur and greater(cur, score) then
  redis.call('EXPIRE', KEYS[2], ARGV[6])
  return 0
end
redis.call('HSET', KEYS[2], 'score', score, 'durationMs', ARGV[3], 'moves', ARGV[4], 'achievedAt', ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return 1
