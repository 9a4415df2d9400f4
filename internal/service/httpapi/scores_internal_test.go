package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/eisland/isle/topology"
)

// Whatever a client sends, a score submission either fails validation with
// a 400, or passes with every number a plain JSON integer in range and every
// string fit for its column.
func FuzzScoreRequest(f *testing.F) {
	for _, seed := range []string{
		`{"submitId":"s1","sessionId":"a-b","score":10,"durationMs":1000,"moves":10,"clientVersion":"1.0"}`,
		`{"submitId":"s1","sessionId":"a-b","score":1.5,"durationMs":1000,"moves":10}`,
		`{"submitId":"s1","sessionId":"a-b","score":"7","durationMs":1e3,"moves":10}`,
		`{"submitId":"s1","sessionId":"a-b","score":9223372036854775808,"durationMs":-0,"moves":2147483648}`,
		`{"submitId":"s 1","sessionId":"a:b","score":null}`,
		`{"submitId":"s1","sessionId":"a-b","score":1,"durationMs":1,"moves":1,"clientVersion":"版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本版本"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req scoreRequest
		if json.Unmarshal(data, &req) != nil {
			return
		}
		run, err := req.validate()
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Details["reason"] == nil {
				t.Fatalf("%s: %v is not a 400 with a reason", data, err)
			}
			return
		}
		for _, raw := range []json.RawMessage{req.Score, req.DurationMs, req.Moves} {
			if bytes.ContainsAny(raw, `."eE`) {
				t.Fatalf("%s: accepted %s", data, raw)
			}
		}
		if run.Score < 0 || run.DurationMs < 0 || run.Moves < 0 || !submitIDField.MatchString(run.SubmitID) ||
			!sessionIDField.MatchString(run.SessionID) || utf8.RuneCountInString(run.ClientVersion) > clientVersionMax {
			t.Fatalf("%s: accepted %+v", data, run)
		}
		// The consumer takes what the API accepts.
		user := int64(1)
		m := topology.ScoreUpsert{SubmitID: run.SubmitID, UserID: &user, GameID: "2048", Score: run.Score, DurationMs: run.DurationMs,
			Moves: run.Moves, ClientVersion: run.ClientVersion}
		if err := m.Validate(); err != nil {
			t.Fatalf("%s: accepted, and its message is refused: %v", data, err)
		}
	})
}
