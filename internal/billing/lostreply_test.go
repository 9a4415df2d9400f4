package billing_test

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// replyEater is a TCP proxy in front of Redis that lets every command
// through but, while eat is above zero, drops the reply to a script
// (EVALSHA or EVAL) and cuts the connection: Redis ran the script, the
// client never learns it. This is what a connection reset under a charge
// does (the fault suite's seed 22: seven charges answered 503 and taken).
type replyEater struct {
	addr   string
	eat    atomic.Int64
	eaten  atomic.Int64
	target string
}

func newReplyEater(t *testing.T, target string) *replyEater {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	p := &replyEater{addr: ln.Addr().String(), target: target}
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

func (p *replyEater) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
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
