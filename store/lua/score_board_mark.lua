-- score_board_mark.lua — starts the rebuild of a leaderboard from MySQL. A
-- missing board gets a sentinel member first, so score_sync.lua writes to it
-- while MySQL is read: a score committed after that read still reaches the
-- board. While the sentinel is there the board is incomplete (a rebuild runs,
-- or one died) and readers rebuild it again; the rebuild removes it last.
--
-- KEYS[1] mg:score:leaderboard:{gameId}
-- ARGV[1] the sentinel member
-- Returns 1 when the board must be rebuilt, 0 when it is complete.

if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[1], '-inf', ARGV[1])
  return 1
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 1
end
return 0
