package game

import "slices"

// A Game is a mini game Isle keeps scores for, with the bounds of a
// plausible run of it (doc/games.md, "Games", derives each from the game's
// rules): a run is checked against them and the session it was played in.
type Game struct {
	ID string
	// Move is what the client counts as one move.
	Move string
	// MovesPerSecond bounds a run's pace: n moves last at least
	// n / MovesPerSecond seconds.
	MovesPerSecond int64
	// PointsPerMove bounds a run's score: n moves make at most
	// n × PointsPerMove points (an average over the run; one move may earn
	// more, see doc/games.md).
	PointsPerMove int64
}

// games are the games of eIsland's client (doc/games.md).
var games = map[string]Game{
	"2048":   {ID: "2048", Move: "a swipe that moved a tile", MovesPerSecond: 50, PointsPerMove: 60},
	"tetris": {ID: "tetris", Move: "a piece locked", MovesPerSecond: 10, PointsPerMove: 27_830},
	"snake":  {ID: "snake", Move: "a step of the snake", MovesPerSecond: 20, PointsPerMove: 10},
}

// Lookup returns the game named id.
func Lookup(id string) (Game, bool) {
	g, ok := games[id]
	return g, ok
}

// IDs lists the games, sorted.
func IDs() []string {
	ids := make([]string, 0, len(games))
	for id := range games {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// MaxScore is the most a run of g can score: the longest run a session
// allows (LongestRun), at g's fastest pace, each move earning g's most.
func (g Game) MaxScore() int64 {
	return g.PointsPerMove * (g.MovesPerSecond * LongestRun.Milliseconds() / 1000)
}
