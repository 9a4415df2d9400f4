package billing_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// replyEater is a TCP proxy in front of Redis that lets every command
// through but, while eat is above zero, drops the reply to a script
// (EVALSHA or EVAL) and cuts the connection: Redis ran the script, the
// client never learns it. This is what a connection reset under a charge
// does (the fault suite's seed 22: seven charges answered 503 and taken).
//
// With refuseAfter set, the first eaten reply also takes the address away:
// the listener closes and every connection is cut, so each later dial is
// refused — a Redis primary that died just after it ran a script.
type replyEater struct {
	addr        string
	eat         atomic.Int64
	eaten       atomic.Int64
	target      string
	refuseAfter atomic.Bool // set by the test while connections are piped
	ln          net.Listener
	mu          sync.Mutex
	conns       []net.Conn
}

func newReplyEater(t *testing.T, target string) *replyEater {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &replyEater{addr: ln.Addr().String(), target: target, ln: ln}
	t.Cleanup(p.refuse)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p
}

// refuse closes the listener and cuts every connection.
func (p *replyEater) refuse() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *replyEater) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	var script atomic.Bool // a script was sent and its reply is due
	go func() {
		defer s.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				lower := bytes.ToLower(buf[:n])
				if bytes.Contains(lower, []byte("\r\nevalsha\r\n")) || bytes.Contains(lower, []byte("\r\neval\r\n")) {
					script.Store(true)
				}
				if _, werr := s.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if script.Swap(false) && p.eat.Add(-1) >= 0 {
				p.eaten.Add(1)
				_ = s.Close()
				if p.refuseAfter.Load() {
					p.refuse()
				}
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A charge whose script ran in Redis but whose answer the connection lost
// is never answered as failed: the API asks Redis again with the same
// request (the id's marker makes that a replay of its own charge) until it
// learns the outcome, and answers the charge as made, once. When Redis
// cannot tell within the request's time, the outcome is unknown (not "not
// charged"), and the same request sent again answers what was taken.
func TestAChargeIsNeverRefusedAfterItWasTaken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newReplyEater(t, storetest.RedisAddr())
	via, err := store.OpenRedis(store.RedisConfig{Addr: p.addr, KeyPrefix: b.r.Keys().Prefix()})
	require.NoError(t, err)
	t.Cleanup(func() { via.Close() })
	svc := billing.New(b.db, via)
	// The balance and the scripts are in place: the eaten replies are the
	// deductions'.
	_, err = svc.Charge(ctx, billing.Request{ID: "warm", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.NoError(t, err)

	// More lost answers than go-redis's own retries (3) cover.
	p.eat.Store(6)
	c, err := svc.Charge(ctx, billing.Request{ID: "lost-6", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 2}})
	require.NoError(t, err, "the script ran: the charge is made, not refused")
	require.EqualValues(t, 6, p.eaten.Load())
	require.False(t, c.Replayed, "its own charge, not an earlier request's")
	require.Equal(t, "2.00000000", c.Deducted.StringFixed(8))
	require.Equal(t, "7.00000000", c.Balance.StringFixed(8), "taken once")

	// Redis answers nothing for longer than the request may wait.
	p.eat.Store(1 << 30)
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	_, err = svc.Charge(short, billing.Request{ID: "lost-all", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.ErrorIs(t, err, billing.ErrOutcomeUnknown)
	require.NotErrorIs(t, err, billing.ErrNoBalance)
	p.eat.Store(0)
	c, err = svc.Charge(ctx, billing.Request{ID: "lost-all", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err)
	require.True(t, c.Replayed, "the request the client was not answered had been charged")
	require.Equal(t, "3.00000000", c.Deducted.StringFixed(8))
	bal, err := b.svc.Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "4.00000000", bal.StringFixed(8), "10 − 1 − 2 − 3: each charge once")
}

// A Redis failover cuts a charge after its script ran: the primary took the
// money and died before answering, and the tries after it find the address
// refusing connections. The outcome stays unknown (never "not charged")
// while no script answers; once one does, it says the charge was taken.
func TestAChargeCutByAFailoverIsNotAnsweredNotCharged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newReplyEater(t, storetest.RedisAddr())
	via, err := store.OpenRedis(store.RedisConfig{Addr: p.addr, KeyPrefix: b.r.Keys().Prefix()})
	require.NoError(t, err)
	t.Cleanup(func() { via.Close() })
	svc := billing.New(b.db, via)
	_, err = svc.Charge(ctx, billing.Request{ID: "warm", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.NoError(t, err)

	p.refuseAfter.Store(true)
	p.eat.Store(1)
	_, err = svc.Charge(ctx, billing.Request{ID: "cut", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 2}})
	require.EqualValues(t, 1, p.eaten.Load())
	t.Logf("answer: %v", err)
	require.ErrorIs(t, err, billing.ErrOutcomeUnknown, "the first try may have run: %v", err)

	c, err := b.svc.Charge(ctx, billing.Request{ID: "cut", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 2}})
	require.NoError(t, err)
	require.True(t, c.Replayed, "the charge answered as unknown had been taken")
	require.Equal(t, "7.00000000", c.Balance.StringFixed(8), "10 − 1 − 2, once each")
}

// A batch whose pipeline's answers are lost answers no item as charged that
// was not, and none as not charged that was: asked again, each answers
// what was taken, once; and when every later try is refused (a failover),
// every item that may have run is outcome unknown.
func TestABatchCutMidwayAnswersEachTruthfully(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := newReplyEater(t, storetest.RedisAddr())
	via, err := store.OpenRedis(store.RedisConfig{Addr: p.addr, KeyPrefix: b.r.Keys().Prefix()})
	require.NoError(t, err)
	t.Cleanup(func() { via.Close() })
	svc := billing.New(b.db, via)
	_, err = svc.Charge(ctx, billing.Request{ID: "warm", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.NoError(t, err)

	batch := func(prefix string) []billing.Request {
		rs := make([]billing.Request, 4)
		for i := range rs {
			rs[i] = billing.Request{ID: prefix + string(rune('a'+i)), Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}}
		}
		return rs
	}
	p.eat.Store(2)
	for _, r := range svc.ChargeAll(ctx, batch("lost-")) {
		require.NoError(t, r.Err, "asked again, each says it was taken")
		require.False(t, r.Charge.Replayed, "its own charge")
	}
	require.EqualValues(t, 2, p.eaten.Load())

	p.refuseAfter.Store(true)
	p.eat.Store(1)
	cut := svc.ChargeAll(ctx, batch("cut-"))
	taken := 0
	for i, r := range b.svc.ChargeAll(ctx, batch("cut-")) {
		require.NoError(t, r.Err)
		if r.Charge.Replayed {
			taken++
			require.ErrorIs(t, cut[i].Err, billing.ErrOutcomeUnknown, "item %d was taken: not answered as refused", i)
		}
	}
	require.Positive(t, taken, "the pipeline ran before its answers were lost")
	bal, err := b.svc.Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "1.00000000", bal.StringFixed(8), "10 − 1 − 4 − 4: each charge once")
}
