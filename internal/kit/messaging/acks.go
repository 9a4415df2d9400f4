package messaging

import (
	"context"
	"time"
)

// ackLag is how long the acks of deliveries answered behind an unanswered
// one wait for it before they go out one by one: long enough that a burst
// of answers leaves as one multiple ack, short enough that one slow
// handler does not hold the acks of those behind it.
const ackLag = 3 * time.Millisecond

// Answer states of a delivery on its channel.
const (
	stPending uint8 = iota // handed out, not yet acked or nacked
	stAck                  // acked by its handler, ack not yet sent
	stNack                 // nacked by its handler, nack not yet sent
	stSent                 // its ack or nack went out on its own
	stKept                 // never handed out: it goes back to the queue with the channel
)

// ackChannel is what an acker sends on: an *amqp.Channel.
type ackChannel interface {
	Ack(tag uint64, multiple bool) error
	Nack(tag uint64, multiple, requeue bool) error
}

// ackEvent is a delivery's arrival (add), its handler's answer (answer),
// its being kept back (keep), or a drain's wait (wait).
type ackEvent struct {
	tag   uint64
	kind  uint8 // evAdd, evAnswer, evKeep, evWait
	ack   bool
	msg   answered                // evAdd: the message whose answer it waits for (nil in tests that answer by evAnswer)
	ended <-chan struct{}         // evAdd: its context's end
	end   context.CancelCauseFunc // evAdd: ends its context
	done  chan struct{}           // evWait: closed when nothing handed out is unanswered
}

// answered is what an acker watches of a message handed out: a
// *message.Message's Acked and Nacked channels, and the end of its context.
type answered interface {
	Acked() <-chan struct{}
	Nacked() <-chan struct{}
}

const (
	evAdd uint8 = iota
	evAnswer
	evKeep
	evWait
)

// acker acks and nacks the deliveries of one channel with the broker, in
// delivery-tag order: the unbroken run of acked deliveries at the front of
// the window goes as one multiple ack; a nack goes out only once the acks
// before it did, and a multiple ack never reaches past an unanswered, nacked
// or kept delivery, so it never acks what its handler nacked or what was
// never handled. Deliveries answered behind one still pending go out one by
// one after ackLag. One goroutine owns the window and watches the
// handlers' answers itself, with no goroutine per message: it waits on the
// front delivery's answer, takes every answer already given behind it up to
// the first still pending, and looks at the rest every ackLag; what
// gathers while it sends goes in the next frame.
type acker struct {
	ch     ackChannel
	events chan ackEvent
	quit   chan struct{}
	dead   chan struct{} // closed when the goroutine has stopped: later answers are dropped
	stats  *AckStats
	lag    time.Duration // how long answers behind an unanswered front wait: ackLag

	// the goroutine's own state
	window  []slot // deliveries by tag, oldest first, none answered at the front but pending or kept ones
	pending int    // handed out and unanswered
	unsent  int    // answered (acked or nacked), not yet sent
	waiters []chan struct{}
}

type slot struct {
	tag   uint64
	state uint8
	msg   answered
	ended <-chan struct{}         // the message's context's end: a shutdown that outlived its timeout
	done  context.CancelCauseFunc // ends the message's context once it is answered, or its channel is gone
}

func newAcker(ch ackChannel, buffer int, stats *AckStats) *acker {
	return newAckerLagging(ch, buffer, stats, ackLag)
}

// newAckerLagging is newAcker whose answers behind an unanswered front
// wait lag rather than ackLag.
func newAckerLagging(ch ackChannel, buffer int, stats *AckStats, lag time.Duration) *acker {
	st := &acker{ch: ch, events: make(chan ackEvent, buffer), quit: make(chan struct{}), dead: make(chan struct{}), stats: stats, lag: lag}
	go st.run()
	return st
}

// send passes ev to the goroutine, or drops it once that has stopped.
func (st *acker) send(ev ackEvent) {
	select {
	case st.events <- ev:
	case <-st.dead:
	}
}

// add puts a delivery in the window before it is handed out as msg, whose
// context ends with ended and is ended by end once the message is answered.
func (st *acker) add(tag uint64, msg answered, ended <-chan struct{}, end context.CancelCauseFunc) {
	st.send(ackEvent{tag: tag, kind: evAdd, msg: msg, ended: ended, end: end})
}

// keep marks a delivery never handed out: it goes back with the channel.
func (st *acker) keep(tag uint64) { st.send(ackEvent{tag: tag, kind: evKeep}) }

// wait returns a channel closed once every delivery handed out is answered
// and sent, or the acker stopped.
func (st *acker) wait() <-chan struct{} {
	done := make(chan struct{})
	select {
	case st.events <- ackEvent{kind: evWait, done: done}:
		return done
	case <-st.dead:
		return st.dead
	}
}

// stop ends the goroutine; answers after it are dropped (the channel is
// closing, and the broker requeues what it held unacked).
func (st *acker) stop() {
	select {
	case <-st.quit:
	default:
		close(st.quit)
	}
	<-st.dead
}

func (st *acker) run() {
	defer close(st.dead)
	lag := time.NewTimer(time.Hour)
	lag.Stop()
	armed := false
	var stuck uint64 // the front's tag when the timer was armed
	for {
		var acked, nacked, ended <-chan struct{}
		if len(st.window) > 0 && st.window[0].state == stPending && st.window[0].msg != nil {
			f := st.window[0]
			acked, nacked, ended = f.msg.Acked(), f.msg.Nacked(), f.ended
		}
		all := false
		select {
		case ev := <-st.events:
			st.apply(ev)
			st.applyQueued()
		case <-acked:
		case <-nacked:
		case <-ended:
		case <-lag.C:
			// Only a front unanswered for a whole ackLag makes the
			// acker look behind it: while the front moves, the answers
			// behind it are taken as it reaches them.
			armed = false
			all = st.unsent > 0 || len(st.window) > 0 && st.window[0].tag == stuck
		case <-st.quit:
			// Answers given up to now still go out (a shutdown whose
			// timeout just passed); on a channel that is gone they fail
			// at once, unsent.
			lag.Stop()
			st.applyQueued()
			st.look(true)
			st.flush()
			st.flushBehind()
			st.release()
			return
		}
		st.look(all)
		st.flush()
		if all {
			st.flushBehind()
		}
		if st.pending == 0 {
			for _, w := range st.waiters {
				close(w)
			}
			st.waiters = st.waiters[:0]
		}
		if !armed && st.lagNeeded() {
			stuck = st.window[0].tag
			lag.Reset(st.lag)
			armed = true
		}
	}
}

// look takes the answers handlers have given: from the front up to the
// first delivery still unanswered, or (all) of the whole window.
func (st *acker) look(all bool) {
	for i := range st.window {
		s := &st.window[i]
		if s.state != stPending || s.msg == nil {
			continue
		}
		switch {
		case closed(s.msg.Acked()):
			st.answer(s, true)
		case closed(s.msg.Nacked()):
			st.answer(s, false)
		case !all:
			return
		}
	}
}

// closed says whether c is closed. A receive that may not block on one
// channel takes no lock while the channel is open and empty, which a select
// of two channels would.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// answer records a handler's answer of s and ends its message's context.
func (st *acker) answer(s *slot, ack bool) {
	s.state = stNack
	if ack {
		s.state = stAck
	}
	st.pending--
	st.unsent++
	if s.done != nil {
		s.done(nil)
	}
}

// release ends the contexts of the messages still unanswered when the
// acker stops, with ErrChannelLost: their channel is gone (or the
// subscriber's hard stop came first), so their acks would be dropped and
// the broker gives them out again. A handler that goes on would apply a
// message that is also being redelivered, and its failure would be copied
// to the retry queue beside the redelivery.
func (st *acker) release() {
	for _, s := range st.window {
		if s.state != stPending || s.msg == nil || s.done == nil {
			continue
		}
		s.done(ErrChannelLost)
	}
}

// applyQueued applies the events already queued, without waiting for more.
func (st *acker) applyQueued() {
	for {
		select {
		case ev := <-st.events:
			st.apply(ev)
		default:
			return
		}
	}
}

func (st *acker) apply(ev ackEvent) {
	switch ev.kind {
	case evAdd:
		st.window = append(st.window, slot{tag: ev.tag, state: stPending, msg: ev.msg, ended: ev.ended, done: ev.end})
		st.pending++
	case evKeep:
		if i := st.find(ev.tag); i >= 0 && st.window[i].state == stPending {
			st.window[i].state = stKept
			st.pending--
		}
	case evAnswer:
		if i := st.find(ev.tag); i >= 0 && st.window[i].state == stPending {
			st.answer(&st.window[i], ev.ack)
		}
	case evWait:
		st.waiters = append(st.waiters, ev.done)
	}
}

// find returns the index of tag in the window, or -1. Tags of one channel
// come in order without gaps, so the first guess is right.
func (st *acker) find(tag uint64) int {
	if len(st.window) == 0 {
		return -1
	}
	if i := int(tag - st.window[0].tag); tag >= st.window[0].tag && i < len(st.window) && st.window[i].tag == tag {
		return i
	}
	for i, s := range st.window {
		if s.tag == tag {
			return i
		}
	}
	return -1
}

// lagNeeded says whether the lag timer has work: answers given behind the
// front to send one by one, or deliveries behind the front still unanswered,
// whose answers only a look at the whole window takes. Slots never handed
// out (kept) give it none: with only those left, it would wake every
// ackLag for nothing while its lane is stuck cancelling on a stalled
// connection.
func (st *acker) lagNeeded() bool {
	behind := st.pending
	if len(st.window) > 0 && st.window[0].state == stPending {
		behind--
	}
	return st.unsent > 0 || behind > 0
}
