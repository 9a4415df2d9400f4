package testsignal

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTB records a Fatalf and ends its goroutine, as testing's does.
type fakeTB struct {
	mu    sync.Mutex
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn with a fakeTB in a goroutine of its own and returns what it
// failed with ("" when it did not).
func run(fn func(t TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func TestASignalIsOffUntilInit(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Send(1) // nothing to receive it: dropped, never blocks
	require.Contains(t, run(func(t TB) { s.Wait(t) }), "off")
	require.Contains(t, run(func(t TB) { s.Empty(t) }), "off")

	s.Init()
	s.Empty(t)
	s.Send(2)
	require.Equal(t, 2, s.Wait(t), "a value sent before Init is not kept")
	s.Empty(t)
}

func TestWaitReturnsTheValuesInTheOrderSent(t *testing.T) {
	t.Parallel()
	var s Signal[string]
	s.Init()
	go func() {
		for _, v := range []string{"a", "b", "c"} {
			s.Send(v)
		}
	}()
	require.Equal(t, "a", s.Wait(t))
	require.Equal(t, "b", s.Wait(t))
	require.Equal(t, "c", s.Wait(t))
	s.Empty(t)
}

func TestWaitForSkipsToTheMatchingValue(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	for i := range 5 {
		s.Send(i)
	}
	require.Equal(t, 3, s.WaitFor(t, func(v int) bool { return v >= 3 }))
	require.Equal(t, 4, s.Wait(t))
}

func TestEmptyFailsOnAValueNotTaken(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	s.Send(7)
	require.Contains(t, run(func(t TB) { s.Empty(t) }), "sent 7")
}

func TestSendNeverBlocksAndEmptyCountsWhatItDropped(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	for i := range buffered + 3 {
		s.Send(i)
	}
	for i := range buffered {
		require.Equal(t, i, s.Wait(t))
	}
	require.Contains(t, run(func(t TB) { s.Empty(t) }), "3 values dropped")
}

// Wait gives up after its bound; the bound here is one that must pass, as
// nothing is ever sent.
func TestWaitFailsWhenNothingComes(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	s.Init()
	require.Contains(t, run(func(t TB) { s.wait(t, time.Millisecond) }), "no signal within 1ms")
}

// Init and Send may race: the code runs while the test turns the signal on.
func TestInitWhileTheCodeSends(t *testing.T) {
	t.Parallel()
	var s Signal[int]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Send(1)
			}
		}
	})
	s.Init()
	require.Equal(t, 1, s.Wait(t))
	close(stop)
	wg.Wait()
}
