package messaging

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// frameLog records what an acker sends, and checks each frame against the
// handlers' answers given before it, as the broker would: an ack of a
// delivery not (or no longer) outstanding closes the channel.
type frameLog struct {
	t      require.TestingT
	frames []string
	answer map[uint64]string // "ack" or "nack", as the handler said; absent: pending or kept
	open   map[uint64]bool   // outstanding at the broker
	acked  map[uint64]int
	nacked map[uint64]int
}

func newFrameLog(t require.TestingT) *frameLog {
	return &frameLog{t: t, answer: map[uint64]string{}, open: map[uint64]bool{}, acked: map[uint64]int{}, nacked: map[uint64]int{}}
}

func (f *frameLog) Ack(tag uint64, multiple bool) error {
	f.frames = append(f.frames, fmt.Sprintf("ack %d multiple=%v", tag, multiple))
	require.True(f.t, f.open[tag], "ack of %d, which is not outstanding", tag)
	for t := range f.open {
		if t == tag || (multiple && t < tag) {
			require.Equal(f.t, "ack", f.answer[t], "delivery %d acked by a frame, its handler said %q", t, f.answer[t])
			f.acked[t]++
			delete(f.open, t)
		}
	}
	return nil
}

func (f *frameLog) Nack(tag uint64, multiple, requeue bool) error {
	f.frames = append(f.frames, fmt.Sprintf("nack %d", tag))
	require.False(f.t, multiple)
	require.True(f.t, requeue, "a nack always requeues")
	require.True(f.t, f.open[tag], "nack of %d, which is not outstanding", tag)
	require.Equal(f.t, "nack", f.answer[tag])
	f.nacked[tag]++
	delete(f.open, tag)
	return nil
}

// synchronous acker: the test calls apply and flush itself.
func testAcker(ch ackChannel) *acker {
	return &acker{ch: ch, stats: &AckStats{}}
}

func TestAckerSendsRunsOfAcksAsOneFrame(t *testing.T) {
	cases := []struct {
		name    string
		answers []string // per tag from 1: ack, nack, pending, kept
		flushes []string // after flush
		behind  []string // then after flushBehind
	}{
		{"all acked", []string{"ack", "ack", "ack", "ack"}, []string{"ack 4 multiple=true"}, nil},
		{"one acked", []string{"ack"}, []string{"ack 1 multiple=false"}, nil},
		{"nack first", []string{"nack", "ack", "ack"}, []string{"nack 1", "ack 3 multiple=true"}, nil},
		{"nack inside", []string{"ack", "ack", "nack", "ack"}, []string{"ack 2 multiple=true", "nack 3", "ack 4 multiple=false"}, nil},
		{"slow front", []string{"pending", "ack", "nack", "ack"}, nil, []string{"ack 2 multiple=false", "nack 3", "ack 4 multiple=false"}},
		{"kept front", []string{"kept", "ack"}, nil, []string{"ack 2 multiple=false"}},
		{"run stops at a slow one", []string{"ack", "ack", "pending", "ack"}, []string{"ack 2 multiple=true"}, []string{"ack 4 multiple=false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFrameLog(t)
			st := testAcker(f)
			for i, a := range c.answers {
				tag := uint64(i + 1)
				f.open[tag] = true
				st.apply(ackEvent{tag: tag, kind: evAdd})
				switch a {
				case "ack", "nack":
					f.answer[tag] = a
					st.apply(ackEvent{tag: tag, kind: evAnswer, ack: a == "ack"})
				case "kept":
					st.apply(ackEvent{tag: tag, kind: evKeep})
				}
			}
			st.flush()
			require.Equal(t, c.flushes, f.frames)
			f.frames = nil
			st.flushBehind()
			require.Equal(t, c.behind, f.frames)
		})
	}
}

// TestAckerNeverAcksWhatWasNotAcked drives an acker with random
// arrivals, answers and flushes: every frame must be one the broker
// accepts, no delivery is acked that its handler nacked or never answered,
// and once everything is answered and flushed, every delivery was answered
// exactly once as its handler said.
func TestAckerNeverAcksWhatWasNotAcked(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFrameLog(rt)
		st := testAcker(f)
		var next uint64 = 1
		var unanswered []uint64
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0, 1: // a delivery arrives
				f.open[next] = true
				st.apply(ackEvent{tag: next, kind: evAdd})
				unanswered = append(unanswered, next)
				next++
			case 2: // a handler answers
				if len(unanswered) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(unanswered)-1).Draw(rt, "which")
				tag := unanswered[i]
				unanswered = append(unanswered[:i], unanswered[i+1:]...)
				ack := rapid.Bool().Draw(rt, "ack")
				f.answer[tag] = map[bool]string{true: "ack", false: "nack"}[ack]
				st.apply(ackEvent{tag: tag, kind: evAnswer, ack: ack})
			case 3:
				st.flush()
			case 4:
				st.flushBehind()
			}
		}
		for _, tag := range unanswered {
			f.answer[tag] = "ack"
			st.apply(ackEvent{tag: tag, kind: evAnswer, ack: true})
		}
		st.flush()
		require.Empty(rt, f.open, "unanswered at the end")
		require.Zero(rt, st.pending)
		require.Zero(rt, st.unsent)
		for tag := uint64(1); tag < next; tag++ {
			if f.answer[tag] == "ack" {
				require.Equal(rt, 1, f.acked[tag], "delivery %d", tag)
			} else {
				require.Equal(rt, 1, f.nacked[tag], "delivery %d", tag)
			}
		}
	})
}

// lockedFrames records a running acker's frames.
type lockedFrames struct {
	mu     sync.Mutex
	frames []string
}

func (l *lockedFrames) Ack(tag uint64, multiple bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, fmt.Sprintf("ack %d multiple=%v", tag, multiple))
	return nil
}

func (l *lockedFrames) Nack(tag uint64, multiple, requeue bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, fmt.Sprintf("nack %d", tag))
	return nil
}

func (l *lockedFrames) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.frames)
}

// A running acker watches the messages' answers itself: answers given
// behind an unanswered front go out one by one after ackLag, the front's
// answer then goes out alone, and each message's context ends once it is
// answered.
func TestAckerWatchesTheMessagesAnswers(t *testing.T) {
	f := &lockedFrames{}
	st := newAcker(f, 16, &AckStats{})
	defer st.stop()
	msgs := make([]*message.Message, 4)
	ended := make([]context.Context, 4)
	for i := range msgs {
		msgs[i] = message.NewMessage(fmt.Sprint(i), nil)
		ctx, cancel := context.WithCancelCause(context.Background())
		ended[i] = ctx
		st.add(uint64(i+1), msgs[i], ctx.Done(), cancel)
	}
	msgs[1].Ack()
	msgs[2].Nack()
	msgs[3].Ack()
	require.Eventually(t, func() bool { return len(f.get()) == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"ack 2 multiple=false", "nack 3", "ack 4 multiple=false"}, f.get())
	require.NoError(t, ended[0].Err(), "the unanswered message's context lives")
	for _, c := range ended[1:] {
		require.Error(t, c.Err(), "an answered message's context ended")
	}
	msgs[0].Ack()
	require.Eventually(t, func() bool { return len(f.get()) == 4 }, 5*time.Second, time.Millisecond)
	require.Equal(t, "ack 1 multiple=false", f.get()[3])
	<-st.wait()
}

// Answers given just before the acker stops (a shutdown whose timeout
// passes) still go out: the broker would otherwise give those deliveries
// out again though they were handled. The lag is an hour, so that the
// answers behind the front all wait for the stop: with ackLag, a busy
// machine could let 3 ms pass between the answers and send 2 alone first.
func TestAckerSendsTheAnswersGivenBeforeItStops(t *testing.T) {
	for range 50 {
		f := &lockedFrames{}
		st := newAckerLagging(f, 16, &AckStats{}, time.Hour)
		msgs := make([]*message.Message, 3)
		for i := range msgs {
			msgs[i] = message.NewMessage(fmt.Sprint(i), nil)
			ctx, cancel := context.WithCancelCause(context.Background())
			st.add(uint64(i+1), msgs[i], ctx.Done(), cancel)
		}
		msgs[1].Ack()
		msgs[2].Nack()
		msgs[0].Ack()
		st.stop()
		require.ElementsMatch(t, []string{"ack 2 multiple=true", "nack 3"}, f.get())
	}
}

// The acker's lag timer runs only while it has work: answers behind the
// front to send, or deliveries behind the front not yet answered. Slots
// never handed out (kept: they go back with the channel) give it none, so
// a lane stuck cancelling its consumer does not keep it waking.
func TestAckerLagRunsOnlyWithWork(t *testing.T) {
	t.Parallel()
	at := func(states ...uint8) *acker {
		st := testAcker(nil)
		for i, s := range states {
			st.window = append(st.window, slot{tag: uint64(i + 1), state: s})
			switch s {
			case stPending:
				st.pending++
			case stAck, stNack:
				st.unsent++
			}
		}
		return st
	}
	require.False(t, at(stKept, stKept).lagNeeded(), "only kept slots")
	require.False(t, at(stPending).lagNeeded(), "the front's own answer wakes it")
	require.False(t, at(stPending, stSent, stKept).lagNeeded(), "nothing behind the front to take")
	require.True(t, at(stPending, stPending).lagNeeded(), "an answer behind the front is taken on the lag")
	require.True(t, at(stKept, stPending).lagNeeded())
	require.True(t, at(stPending, stAck).lagNeeded(), "an answer behind the front to send")
}
