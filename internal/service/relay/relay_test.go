package relay_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Two relays draining 5,000 rows at once publish each exactly once, as it
// is, and leave none pending.
func TestTwoRelaysPublishEveryRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentReceipt)
	c := b.consume(t, dom.Queue)
	ids := b.insertOutbox(t, 5000)

	cfg := relay.Config{Interval: 50 * time.Millisecond}
	began := time.Now()
	stop1 := run(t, b.relay(t, b.pub, cfg))
	stop2 := run(t, b.relay(t, b.publisher(t), cfg))
	require.Eventually(t, func() bool { d, _ := c.counts(); return d == len(ids) }, time.Minute, poll)
	took := time.Since(began)
	stop1()
	stop2()

	require.Zero(t, b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL"))
	require.Equal(t, len(ids), b.count(t, "SELECT COUNT(*) FROM outbox WHERE attempts = 1"), "no row was claimed twice")
	require.Equal(t, 2, b.count(t, "SELECT COUNT(DISTINCT SUBSTRING_INDEX(claimed_by, '/', 1)) FROM outbox"), "both relays published")
	// Every publish was confirmed once (attempts = 1), so every copy the
	// relays sent is in the queue ahead of a last message published now:
	// once it arrives, so has any duplicate.
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, MessageID: "last", Body: []byte("{}")}))
	require.Eventually(t, func() bool { return c.times("last") == 1 }, 10*time.Second, poll)
	distinct, total := c.counts()
	require.Equal(t, len(ids)+1, distinct)
	require.Equal(t, len(ids)+1, total, "no message was delivered twice")
	for _, id := range ids {
		require.Equal(t, 1, c.times(id), id)
	}
	t.Logf("5000 rows by two relays in %v", took.Round(time.Millisecond))

	// A row is published as it is.
	d := c.deliveries()[0]
	var n struct{ N int }
	require.NoError(t, json.Unmarshal(d.Body, &n))
	require.Equal(t, ids[n.N], d.MessageId)
	require.Equal(t, "trace-"+ids[n.N][:8], d.CorrelationId)
	require.Equal(t, "trace-"+ids[n.N][:8], d.Headers[messaging.HeaderTraceID])
	require.EqualValues(t, dom.TypeID, d.Headers[messaging.HeaderTypeID])
	require.EqualValues(t, strconv.Itoa(n.N), d.Headers["x-n"])
	require.EqualValues(t, "1", d.Headers["x-attempt"], "a number in headers is sent as written")
	require.Equal(t, dom.Exchange, d.Exchange)
}

// A publish that fails leaves its row pending, with the error, not due
// until its backoff has passed, after which a relay publishes it.
func TestFailedPublishLeavesRowPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dom := b.domain(t, topology.DomainPaymentReceipt)
	c := b.consume(t, dom.Queue)
	ids := b.insertOutbox(t, 3)

	closed := b.publisher(t)
	require.NoError(t, closed.Close())
	backoff := 500 * time.Millisecond
	res, err := b.relay(t, closed, relay.Config{BackoffBase: backoff}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 3, Failed: 3}, res["outbox"])
	require.Equal(t, 3, b.count(t, `SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND claimed_by IS NULL AND parked_at IS NULL
		AND attempts = 1 AND last_error <> '' AND available_at > NOW(6) + INTERVAL 200000 MICROSECOND`), "a broker failure is never parked")
	var lastErr string
	require.NoError(t, b.db.Raw("SELECT last_error FROM outbox WHERE message_id = ?", ids[2]).Scan(&lastErr).Error)
	require.Contains(t, lastErr, "publisher closed")
	// The third row fails again, then again (the working relay below
	// publishes the first two only).
	require.NoError(t, b.db.Exec("UPDATE outbox SET domain = 'no-such-domain' WHERE message_id = ?", ids[2]).Error)

	working := b.relay(t, b.pub, relay.Config{BackoffBase: backoff})
	res, err = working.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res["outbox"].Claimed, "the rows wait for their backoff")

	require.Eventually(t, func() bool {
		return b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND available_at <= NOW(6)") == 3
	}, 10*time.Second, poll, "the backoff passes")
	res, err = working.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 3, Published: 2, Parked: 1}, res["outbox"])
	require.Eventually(t, func() bool { d, _ := c.counts(); return d == 2 }, 10*time.Second, poll)
	require.Equal(t, 1, c.times(ids[0]))
	require.Equal(t, 1, c.times(ids[1]))
	// A row that cannot be published as it is is parked, not backed off
	// (TestRowsThatCanNeverPublishAreParked).
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM outbox WHERE domain = 'no-such-domain' AND published_at IS NULL
		AND attempts = 2 AND parked_at IS NOT NULL`))
}

// blockingSender holds every Send, once confirmed, until release is closed.
type blockingSender struct {
	entered chan struct{}
	release chan struct{}
	pub     relay.Sender
}

func (s *blockingSender) Send(ctx context.Context, out messaging.Outgoing) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	err := s.pub.Send(ctx, out)
	<-s.release
	return err
}

// A relay whose lease ran out does not mark a row that another relay
// claimed meanwhile: the other relay's claim is the one that counts.
func TestMarkIsFencedByTheClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dom := b.domain(t, topology.DomainPaymentReceipt)
	c := b.consume(t, dom.Queue)
	ids := b.insertOutbox(t, 1)

	slow := &blockingSender{entered: make(chan struct{}, 1), release: make(chan struct{}), pub: b.pub}
	lease := 300 * time.Millisecond
	done := make(chan relay.Result, 1)
	slowRelay := b.relay(t, slow, relay.Config{Owner: "slow", Lease: lease})
	go func() {
		res, err := slowRelay.RunOnce(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-slow.entered
	require.Eventually(t, func() bool {
		return b.count(t, "SELECT COUNT(*) FROM outbox WHERE claimed_by LIKE 'slow/%' AND available_at <= NOW(6)") == 1
	}, 10*time.Second, poll, "the slow relay's lease runs out")
	res, err := b.relay(t, b.pub, relay.Config{Owner: "fast"}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 1, Published: 1}, res["outbox"])
	close(slow.release)
	require.Equal(t, relay.TableResult{Claimed: 1, Fenced: 1}, (<-done)["outbox"])

	require.Equal(t, 1, b.count(t, "SELECT COUNT(*) FROM outbox WHERE claimed_by LIKE 'fast/%' AND attempts = 2 AND published_at IS NOT NULL"))
	require.Eventually(t, func() bool { return c.times(ids[0]) == 2 }, 10*time.Second, poll, "at least once: both published it")
}

// A batch that found rows is followed by another poll after 50 ms, not
// after Interval: rows coming in are not left for a whole Interval. Each
// empty poll after that doubles the wait, up to Interval.
func TestRelayPollsSoonAfterRowsAndBacksOffToTheInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.relay(t, b.pub, relay.Config{Interval: 3 * time.Second, Tables: []string{"outbox"}})
	polled := r.Polled()
	polled.Init()
	run(t, r)
	b.insertOutbox(t, 1)
	found := polled.WaitFor(t, func(p relay.Poll) bool { return p.Claimed > 0 })
	require.Equal(t, relay.Poll{Table: "outbox", Claimed: 1, Wait: 50 * time.Millisecond}, found)
	var waits []time.Duration
	for len(waits) == 0 || waits[len(waits)-1] < 3*time.Second {
		p := polled.Wait(t)
		require.Zero(t, p.Claimed, "no row came since")
		waits = append(waits, p.Wait)
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3000 * ms}, waits)
}

// Rows that keep coming are published soon after their commit, though the
// relay polls an idle table only every Interval. The lag is logged; with
// -tags bench (timed) the worst must be under a second, where a row left
// for the next Interval waits up to 3 (the default run checks the polls
// themselves: TestRelayPollsSoonAfterRowsAndBacksOffToTheInterval).
func TestRowsComingInAreNotLeftForAWholeInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run(t, b.relay(t, b.pub, relay.Config{Interval: 3 * time.Second}))
	pending := func() int { return b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL") }
	// The first row makes the relay active. It is not measured: when it
	// commits after the relay's first poll, the table looked idle and the
	// row waits for the next Interval, as rows of an idle table do.
	first := b.insertOutbox(t, 1)[0]
	require.Eventually(t, func() bool { return pending() == 0 }, 10*time.Second, 10*time.Millisecond)

	for range 50 { // 2.5 s of rows, one every 50 ms
		b.insertOutbox(t, 1)
		time.Sleep(50 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return pending() == 0 }, 10*time.Second, 10*time.Millisecond)
	worst := b.count(t, "SELECT MAX(TIMESTAMPDIFF(MICROSECOND, created_at, published_at)) DIV 1000 FROM outbox WHERE message_id <> ?", first)
	t.Logf("worst lag of 50 rows at 20 rows/s with a 3 s interval: %d ms", worst)
	if timed {
		require.Less(t, worst, 1000, "ms from commit to published; a row left for the next Interval waits up to 3,000")
	}
}
