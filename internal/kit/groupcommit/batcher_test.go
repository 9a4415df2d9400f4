package groupcommit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/eisland/isle/internal/kit/groupcommit"
	"github.com/stretchr/testify/require"
)

// While a commit runs, the calls that arrive queue up and go together in
// the next; an item that fails its batch fails alone; Close drains.
func TestBatcherGroupsSplitsAndDrains(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	held, open := make(chan int, 1), make(chan struct{})
	var once sync.Once
	b := groupcommit.New("test", 8, func(ctx context.Context, qs []string) ([]string, error) {
		once.Do(func() { held <- len(qs); <-open }) // the first commit lasts until the test lets it end
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
	queued := b.Queued()
	queued.Init()

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
	// Two calls at least queue up behind the first commit, whatever it took.
	first := <-held
	for n := 0; n < first+2; {
		n += queued.Wait(t)
	}
	close(open)
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

// DoAll sends many items in as few flushes as max allows, sharing them with
// other callers', and answers each item on its own.
func TestDoAllFillsFlushesAndAnswersEachItem(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sizes []int
	b := groupcommit.New("test", 4, func(ctx context.Context, qs []int) ([]int, error) {
		for _, q := range qs {
			if q < 0 {
				return nil, errors.New("negative")
			}
		}
		out := make([]int, len(qs))
		for i, q := range qs {
			out[i] = q * 2
		}
		return out, nil
	})
	defer b.Close()
	b.Observe = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }
	rs, errs := b.DoAll(context.Background(), []int{1, 2, 3, -4, 5, 6, 7, 8, 9, 10})
	require.Equal(t, []int{2, 4, 6, 0, 10, 12, 14, 16, 18, 20}, rs)
	for i, err := range errs {
		if i == 3 {
			require.Error(t, err)
			continue
		}
		require.NoError(t, err, "item %d failed with the bad one", i)
	}
	// Queued as one, they fill whole flushes; the flush with the bad item
	// goes again one by one.
	require.Equal(t, []int{4, 1, 1, 1, 1, 4, 2}, sizes)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs = b.DoAll(ctx, []int{1, 2})
	for _, err := range errs {
		require.ErrorIs(t, err, context.Canceled)
	}
}

// A call whose caller gave up (its context ended) before its flush began is
// never flushed: the caller was told it failed, so it must not commit. A
// call already in a flush when its context ends waits for the flush: the
// answer is what the commit did, not a guess.
func TestAGivenUpCallIsNeverFlushedAndAFlushingOneIsWaitedFor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var flushed []string
	entered, open := make(chan string, 8), make(chan struct{})
	b := groupcommit.New("test", 8, func(ctx context.Context, qs []string) ([]string, error) {
		mu.Lock()
		flushed = append(flushed, qs...)
		mu.Unlock()
		entered <- qs[0]
		<-open
		return qs, nil
	})
	defer b.Close()
	queued := b.Queued()
	queued.Init()

	inFlush, cancelInFlush := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := b.Do(inFlush, "committing")
		first <- err
	}()
	require.Equal(t, "committing", <-entered)
	queued.Wait(t)

	givenUp, cancelGivenUp := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := b.Do(givenUp, "given-up")
		second <- err
	}()
	queued.Wait(t) // "given-up" waits behind the flush in progress
	cancelGivenUp()
	require.ErrorIs(t, <-second, context.Canceled)
	cancelInFlush()
	close(open)
	require.NoError(t, <-first, "the call was in the flush: its answer is the flush's")

	r, err := b.Do(context.Background(), "after")
	require.NoError(t, err)
	require.Equal(t, "after", r)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"committing", "after"}, flushed, "the given-up call never reached a flush")
}
