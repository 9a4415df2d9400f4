package storetest

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Lines written from many goroutines at once come out whole.
func TestLogBufferTakesConcurrentWriters(t *testing.T) {
	t.Parallel()
	var b LogBuffer
	require.Nil(t, b.Lines(), "nothing written")
	log := slog.New(slog.NewJSONHandler(&b, nil))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				log.Info("step", "w", w, "i", i)
			}
		})
	}
	wg.Wait()
	log.Warn("done")
	require.Len(t, b.Lines(), 401)
	require.Len(t, b.JSON(t), 401)
	require.Len(t, b.LinesWith(t, "step"), 400)
	require.Equal(t, "WARN", b.Line(t, "done")["level"])
	require.Nil(t, b.Line(t, "never logged"))
}
