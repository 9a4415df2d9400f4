// Package testsignal lets a test wait for the code to reach a point instead
// of sleeping: "the lane failed to consume", "the batcher queued a call". A
// component keeps a Signal per point and calls Send there; a Signal is off
// until a test calls Init, and Send on a Signal that is off is one atomic
// load and a branch, so production code pays nothing worth naming.
//
// A test turns the signal on (through an accessor its package exports to
// its own tests, in export_test.go), makes the code run, and Waits for the
// value the code sent, or checks with Empty that nothing was sent. Waiting
// on a signal rather than on the clock makes the test as fast as the code
// and unable to fail because the machine was slow.
package testsignal

import (
	"sync/atomic"
	"time"
)

// Timeout bounds Wait, so that a test whose code never reaches the point
// fails rather than hangs. It is not a pace: Wait returns as soon as the
// value is there.
const Timeout = 30 * time.Second

// buffered is how many values a Signal keeps for its test. Send never
// blocks: past this, values are dropped and counted (Empty reports them).
const buffered = 1024

// TB is the part of testing.TB a Signal uses (this package does not import
// testing: production code holds Signals).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal is a point of the code a test can wait for, carrying a value of T
// (what the code saw there). The zero Signal is off. It is safe for
// concurrent use; Init may come before or while the code runs.
type Signal[T any] struct {
	on atomic.Pointer[state[T]]
}

type state[T any] struct {
	ch      chan T
	dropped atomic.Int64
}

// Init turns s on: from now on each Send keeps its value for Wait. Calling
// it again starts afresh, forgetting the values not taken.
func (s *Signal[T]) Init() {
	s.on.Store(&state[T]{ch: make(chan T, buffered)})
}

// Send tells the test waiting on s that the code reached its point, with v.
// It does nothing while s is off, and never blocks.
func (s *Signal[T]) Send(v T) {
	st := s.on.Load()
	if st == nil {
		return
	}
	select {
	case st.ch <- v:
	default:
		st.dropped.Add(1)
	}
}

// Wait returns the next value sent, in the order sent, waiting for it up to
// Timeout; then it fails the test.
func (s *Signal[T]) Wait(t TB) T {
	t.Helper()
	return s.wait(t, Timeout)
}

// WaitFor returns the next value sent for which match is true, dropping the
// values before it, waiting up to Timeout in all.
func (s *Signal[T]) WaitFor(t TB, match func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		v := s.wait(t, time.Until(deadline))
		if match(v) {
			return v
		}
	}
}

func (s *Signal[T]) wait(t TB, within time.Duration) T {
	t.Helper()
	st := s.on.Load()
	if st == nil {
		t.Fatalf("testsignal: Wait on a signal that is off: call Init before the code runs")
		var zero T
		return zero
	}
	select {
	case v := <-st.ch: // not left to a select's chance against a passed deadline
		return v
	default:
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-st.ch:
		return v
	case <-timer.C:
		t.Fatalf("testsignal: no signal within %v", within)
		var zero T
		return zero
	}
}

// Empty fails the test if a value was sent that no Wait took (or dropped):
// with s turned on before the code ran, it says the code did not reach
// the point since.
func (s *Signal[T]) Empty(t TB) {
	t.Helper()
	st := s.on.Load()
	if st == nil {
		t.Fatalf("testsignal: Empty on a signal that is off: call Init before the code runs")
		return
	}
	select {
	case v := <-st.ch:
		t.Fatalf("testsignal: the code reached the point (sent %v)", v)
	default:
	}
	if n := st.dropped.Load(); n > 0 {
		t.Fatalf("testsignal: the code reached the point (%d values dropped)", n)
	}
}
