package relay_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/internal/relay"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary a relay process ("dsn|prefix"): see TestMain.
const childEnv = "ISLE_RELAY_TEST_CHILD"

// childLease is the lease of the child relay's claims.
const childLease = 2 * time.Second

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
	dsn, prefix, _ := strings.Cut(spec, "|")
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
	r, err := relay.New(db, tp, pub, relay.Config{Owner: "child", BatchSize: 500, Lease: childLease, Interval: 50 * time.Millisecond},
		relay.NewMetrics(prometheus.NewRegistry()), log)
	if err != nil {
		return err
	}
	r.Run(context.Background())
	return nil
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

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+storetest.MySQLServerDSN()+b.dbName+"|"+b.prefix)
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })

	// Kill it while it holds a claimed batch, after it published some.
	inFlight := "SELECT COUNT(*) FROM outbox WHERE published_at IS NULL AND claimed_by LIKE 'child/%'"
	require.Eventually(t, func() bool {
		return b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NOT NULL") > 0 && b.count(t, inFlight) > 0
	}, time.Minute, time.Millisecond)
	require.NoError(t, child.Process.Kill())
	<-exited
	killedAt := time.Now()
	stuck := b.count(t, inFlight)
	require.Positive(t, stuck, "killed mid-batch")
	published := b.count(t, "SELECT COUNT(*) FROM outbox WHERE published_at IS NOT NULL")
	require.Less(t, published, len(ids))

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
