package groupcommit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/groupcommit"
	"github.com/stretchr/testify/require"
)

func TestBatcherGroupsSplitsAndDrains(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	b := groupcommit.New(8, func(ctx context.Context, qs []string) ([]string, error) {
		time.Sleep(10 * time.Millisecond) // a commit
		if slices.Contains(qs, "bad") {
			return nil, errors.New("bad row")
		}
		out := make([]string, len(qs))
		for i, q := range qs {
			out[i] = q + "!"
		}
		return out, nil
	})
	b.Observe = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }

	var wg sync.WaitGroup
	errs := make(map[string]error)
	var emu sync.Mutex
	for _, q := range []string{"a", "b", "c", "bad", "d", "e", "f", "g", "h", "i"} {
		wg.Go(func() {
			r, err := b.Do(context.Background(), q)
			emu.Lock()
			errs[q] = err
			emu.Unlock()
			if err == nil {
				require.Equal(t, q+"!", r)
			}
		})
	}
	wg.Wait()
	require.Error(t, errs["bad"])
	for q, err := range errs {
		if q != "bad" {
			require.NoError(t, err, "%s failed with the bad item", q)
		}
	}
	require.Greater(t, slices.Max(sizes), 1, "concurrent calls share a flush: %v", sizes)

	b.Close()
	_, err := b.Do(context.Background(), "late")
	require.ErrorIs(t, err, groupcommit.ErrBatcherClosed)
}
