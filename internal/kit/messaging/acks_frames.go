package messaging

import "sync/atomic"

// This file holds the frames an acker sends to the broker (acks.go holds
// its window and the goroutine that owns it) and their counts.

// AckStats count the frames a Subscriber's channels sent to ack or nack
// deliveries.
type AckStats struct {
	MultipleAcks atomic.Int64 // acks that took a run of deliveries at once
	SingleAcks   atomic.Int64 // acks of one delivery behind an unanswered one, or of a run of one
	Nacks        atomic.Int64 // nacks, each of one delivery, each requeueing it
	Acked        atomic.Int64 // deliveries acked, by any of those
}

// flush sends what the front of the window allows: runs of acks as one
// multiple ack each, nacks one by one after the acks before them.
func (st *acker) flush() {
	var run uint64 // the last tag of the run of acks not yet sent; 0 for none
	n := 0
	i := 0
loop:
	for ; i < len(st.window); i++ {
		s := st.window[i]
		switch s.state {
		case stPending, stKept:
			break loop
		case stAck:
			run = s.tag
			n++
			st.unsent--
		case stNack:
			st.ackRun(run, n)
			run, n = 0, 0
			st.nack(s.tag)
			st.unsent--
		case stSent:
			// answered on its own before: a multiple ack reaching past it is
			// harmless, as the broker no longer holds it.
		}
	}
	st.ackRun(run, n)
	st.window = st.window[i:]
	if len(st.window) == 0 {
		st.window = st.window[:0:0] // let a long-grown array go
	}
}

// flushBehind sends, one by one, what was answered behind the front.
func (st *acker) flushBehind() {
	for i := range st.window {
		switch s := &st.window[i]; s.state {
		case stAck:
			st.ackRun(s.tag, 1)
			s.state = stSent
			st.unsent--
		case stNack:
			st.nack(s.tag)
			s.state = stSent
			st.unsent--
		}
	}
}

// ackRun acks the n deliveries of a run ending at tag, in one frame. A
// failed send is not retried: the channel is gone, and the broker requeues
// what it held.
func (st *acker) ackRun(tag uint64, n int) {
	if n == 0 {
		return
	}
	if st.ch.Ack(tag, n > 1) != nil {
		return
	}
	if n > 1 {
		st.stats.MultipleAcks.Add(1)
	} else {
		st.stats.SingleAcks.Add(1)
	}
	st.stats.Acked.Add(int64(n))
}

// nack gives a delivery back to its queue: the contract's classic main
// queues have no dead-letter exchange, so a nack without requeue would lose
// it.
func (st *acker) nack(tag uint64) {
	if st.ch.Nack(tag, false, true) == nil {
		st.stats.Nacks.Add(1)
	}
}
