package relay_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary a relay process ("dsn|prefix|lease"): see
// TestMain.
const childEnv = "ISLE_RELAY_TEST_CHILD"

// The child relay claims batches of childBatch rows and publishes
// childStallAfter messages (whole batches, then part of one), then stalls in
// its next publish until it is killed: it dies holding a claimed batch it
// never marks, with no statement of its own still running in MySQL (a mark
// sent just before a SIGKILL still commits on the server).
const (
	childBatch      = 500
	childStallAfter = 2*childBatch + 200
	childLease      = 2 * time.Second // TestKilledRelayLosesNothing's lease
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "relay child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild runs a relay until the process is killed.
func runChild(spec string) error {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want dsn|prefix|lease", childEnv, spec)
	}
	dsn, prefix := parts[0], parts[1]
	lease, err := time.ParseDuration(parts[2])
	if err != nil {
		return err
	}
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	if err != nil {
		return err
	}
	tp, err := topology.New(topology.Config{Prefix: prefix})
	if err != nil {
		return err
	}
	log := testLogger()
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: "relay-child"}, tp, nil, log)
	if err != nil {
		return err
	}
	r, err := relay.New(db, tp, &stallingSender{pub: pub, left: childStallAfter},
		relay.Config{Owner: "child", BatchSize: childBatch, Lease: lease, Interval: 50 * time.Millisecond},
		relay.NewMetrics(prometheus.NewRegistry()), log)
	if err != nil {
		return err
	}
	r.Run(context.Background())
	return nil
}

// stallingSender publishes its first left messages, then blocks for ever.
type stallingSender struct {
	pub  relay.Sender
	mu   sync.Mutex
	left int
}

func (s *stallingSender) Send(ctx context.Context, out messaging.Outgoing) error {
	s.mu.Lock()
	ok := s.left > 0
	s.left--
	s.mu.Unlock()
	if !ok {
		select {}
	}
	return s.pub.Send(ctx, out)
}

// A relay killed with SIGKILL in the middle of a batch leaves its claimed
// rows to the lease: another relay publishes them once it has run out.
// Nothing is lost; the killed batch's messages may go out twice.
func TestKilledRelayLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentReceipt)
	c := b.consume(t, dom.Queue)
	ids := b.insertOutbox(t, 20000)

	killedAt := b.killChildMidBatch(t, childLease)
	stuck := b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND claimed_by LIKE 'child/%'")
	require.Equal(t, childBatch, stuck, "killed mid-batch")
	published := b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NOT NULL")
	require.Equal(t, childStallAfter-childStallAfter%childBatch, published, "the whole batches before it")

	stop := run(t, b.relay(t, b.pub, relay.Config{Owner: "survivor", Interval: 50 * time.Millisecond}))
	require.Eventually(t, func() bool { d, _ := c.counts(); return d == len(ids) }, time.Minute, poll)
	stop()
	require.Zero(t, b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL"))
	require.Zero(t, b.count(t, "SELECT COUNT(*) FROM outbox WHERE claimed_by LIKE 'child/%' AND published_at > ?", killedAt),
		"no row the killed relay held was marked on its behalf")
	// attempts >= 2: a child slowed down past its own lease may have claimed
	// its batch a second time before it was killed.
	require.Equal(t, stuck, b.count(t, "SELECT COUNT(*) FROM outbox WHERE claimed_by LIKE 'survivor/%' AND attempts >= 2"),
		"the killed batch was claimed again, after its lease")
	_, total := c.counts()
	t.Logf("killed after %d of %d rows were marked, with %d claimed; %d deliveries (%d duplicates)",
		published, len(ids), stuck, total, total-len(ids))
	require.LessOrEqual(t, total-len(ids), stuck, "only the killed batch went out twice")
}

// A relay killed with SIGKILL in the middle of a batch is gone at once for
// the others: its MySQL connection, and the lock that said it was alive,
// went with it. A relay running beside it puts the killed batch back and
// publishes it without waiting for the lease (here an hour).
func TestKilledRelaysRowsAreTakenAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainPaymentReceipt)
	c := b.consume(t, dom.Queue)
	ids := b.insertOutbox(t, 20000)

	killedAt := b.killChildMidBatch(t, time.Hour)
	stuck := b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND claimed_by LIKE 'child/%'")
	require.Equal(t, childBatch, stuck, "killed mid-batch")

	survivor := b.relay(t, b.pub, relay.Config{Owner: "survivor", Interval: 50 * time.Millisecond})
	require.Equal(t, store.OutboxTables, survivor.Tables(), "every table by default")
	stop := run(t, survivor)
	require.Eventually(t, func() bool { d, _ := c.counts(); return d == len(ids) }, time.Minute, poll,
		"every row published while the killed relay's lease of an hour still runs")
	stop()
	require.Zero(t, b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL"))
	require.Equal(t, stuck, b.count(t, "SELECT COUNT(*) FROM outbox WHERE claimed_by LIKE 'survivor/%' AND attempts >= 2 AND published_at > ?", killedAt),
		"the killed batch was claimed again by the survivor")
	require.Zero(t, b.count(t, "SELECT COUNT(*) FROM outbox_relay WHERE owner = 'child'"), "the killed relay is no longer listed")
	_, total := c.counts()
	require.LessOrEqual(t, total-len(ids), stuck, "only the killed batch went out twice")
}

// killChildMidBatch starts a relay process (owner "child", claims leased for
// lease) on the test's database and kills it with SIGKILL once it stalls
// holding a claimed batch, after it published and marked whole batches. It
// returns when the process is gone.
func (b *testBundle) killChildMidBatch(t *testing.T, lease time.Duration) (killedAt time.Time) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+storetest.MySQLServerDSN()+b.dbName+"|"+b.prefix+"|"+lease.String())
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })

	// The stall: the batches before it marked, the next one claimed.
	marked := childStallAfter - childStallAfter%childBatch
	require.Eventually(t, func() bool {
		return b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NOT NULL") == marked &&
			b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND claimed_by LIKE 'child/%'") == childBatch
	}, time.Minute, poll)
	require.NoError(t, child.Process.Kill())
	<-exited //nolint:errcheck // killed: its exit error says only that
	return time.Now()
}
