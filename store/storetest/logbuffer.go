package storetest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// LogBuffer is a log sink the code's goroutines write while the test reads
// it: a bytes.Buffer behind a mutex. The zero LogBuffer is empty and ready.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written until now.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines are the lines written until now, as written, without their
// newlines; none while nothing was written.
func (b *LogBuffer) Lines() []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// JSON decodes each line written until now, for a JSON handler's output;
// a line that is not a JSON object fails the test.
func (b *LogBuffer) JSON(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range b.Lines() {
		var line map[string]any
		if err := json.Unmarshal([]byte(raw), &line); err != nil {
			t.Fatalf("storetest: a log line is not JSON: %v: %s", err, raw)
		}
		out = append(out, line)
	}
	return out
}

// Line is the first JSON line logged with msg, or nil.
func (b *LogBuffer) Line(t testing.TB, msg string) map[string]any {
	t.Helper()
	for _, line := range b.JSON(t) {
		if line["msg"] == msg {
			return line
		}
	}
	return nil
}

// LinesWith are the JSON lines logged with msg, in order.
func (b *LogBuffer) LinesWith(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range b.JSON(t) {
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}
