//go:build chaos

package e2e_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

var chaosCluster = flag.Bool("chaos.cluster", false, "run TestClusterFaults against the local cluster of scripts/cluster (scripts/chaos -cluster starts it)")

// TestClusterFaults runs the fleet on the local cluster of scripts/cluster
// (three RabbitMQ nodes; a Redis primary, its replica and three Sentinels)
// under usage, payment and upload load while nodes die (doc/deploy.md,
// "Clustered RabbitMQ and Redis"). With classic queues, all on node 1: a
// SIGKILL of node 2, which holds none of them but carries the API's and
// the relay's connections; a SIGKILL of node 1 and its restart; a SIGKILL
// of the Redis master, so that Sentinel promotes the replica. With quorum
// queues: a SIGKILL of the node that leads the billing queues. After each
// phase the fault suite's checks: nothing accepted lost, nothing applied
// twice, money exact. It prints, per fault, how long the usage API refused
// (first refusal to first 200 again) and what it answered meanwhile.
func TestClusterFaults(t *testing.T) {
	if !*chaosCluster {
		t.Skip("needs the local cluster: scripts/chaos -cluster starts it and runs this test")
	}
	cl := newLocalCluster(t)
	store.LogRedisTo(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))) // the test's own clients: warnings only
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("cluster seed %d (-chaos.cluster -chaos.seed=%d reproduces the load)", seed, seed)

	t.Run("classic queues", func(t *testing.T) {
		cl.phase(t, seed, topology.QueueClassic, []clusterFault{
			{name: "SIGKILL RabbitMQ node 2 (no queue; the api's and relay's node)", hold: 8 * time.Second,
				inject: func(t *testing.T) { t.Helper(); cl.script(t, "kill", "rabbitmq", "2") }},
			{name: "SIGKILL RabbitMQ node 1 (every queue), restarted after 10 s", hold: 10 * time.Second,
				inject: func(t *testing.T) { t.Helper(); cl.script(t, "kill", "rabbitmq", "1") }},
			{name: "SIGKILL the Redis master (Sentinel promotes the replica)",
				inject: func(t *testing.T) {
					t.Helper()
					was := cl.redisMaster(t)
					cl.script(t, "kill", "redis-master")
					require.Eventually(t, func() bool { m := cl.redisMaster(t); return m != "" && m != was },
						time.Minute, 100*time.Millisecond, "no promotion after the Redis master %s died", was)
				}},
		})
	})
	t.Run("quorum queues", func(t *testing.T) {
		cl.phase(t, seed+1, topology.QueueQuorum, []clusterFault{
			{name: "SIGKILL the leader of the billing queues, restarted after 10 s", hold: 10 * time.Second,
				inject: func(t *testing.T) {
					t.Helper()
					queue := cl.billingQueue
					node := cl.queueNode(t, queue)
					m := regexp.MustCompile(`^isle-c(\d)@`).FindStringSubmatch(node)
					require.NotNil(t, m, "queue %s: leader %q is not a node of scripts/cluster", queue, node)
					t.Logf("the leader of %s is %s", queue, node)
					cl.script(t, "kill", "rabbitmq", m[1])
				}},
		})
	})
}

// clusterFault is one fault of a phase: inject brings it about; after
// hold (or at once) scripts/cluster up starts what it killed.
type clusterFault struct {
	name   string
	hold   time.Duration
	inject func(t *testing.T)
}

// localCluster is the running cluster, as scripts/cluster prints it.
type localCluster struct {
	script       func(t *testing.T, args ...string) string
	env          map[string]string // RABBITMQ_ADDRS, RABBITMQ_MANAGEMENT_URL, REDIS_SENTINEL_*
	addrs        []string          // each RabbitMQ node's host:port, node 1 first
	billingQueue string            // set by the running phase
}

func newLocalCluster(t *testing.T) *localCluster {
	t.Helper()
	bin, err := filepath.Abs("../scripts/cluster")
	require.NoError(t, err)
	cl := &localCluster{env: map[string]string{}}
	cl.script = func(t *testing.T, args ...string) string {
		t.Helper()
		// To a file, not a pipe: the daemons it starts would hold a pipe open.
		f, err := os.CreateTemp(t.TempDir(), "cluster")
		require.NoError(t, err)
		defer f.Close()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Run()
		out, _ := os.ReadFile(f.Name())
		require.NoError(t, err, "scripts/cluster %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	sc := bufio.NewScanner(strings.NewReader(cl.script(t, "env")))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "="); ok && !strings.HasPrefix(k, "#") {
			cl.env[k] = v
		}
	}
	cl.addrs = strings.Split(cl.env["RABBITMQ_ADDRS"], ",")
	require.Len(t, cl.addrs, 3, "scripts/cluster env: %v", cl.env)
	require.NotEmpty(t, cl.env["REDIS_SENTINEL_ADDRS"], "scripts/cluster env: %v", cl.env)
	return cl
}

// urls are the AMQP URLs of the nodes, starting with node first (1-based).
func (cl *localCluster) urls(first int) []string {
	var out []string
	for _, addr := range strings.Split(cl.addrsFrom(first), ",") {
		out = append(out, "amqp://guest:guest@"+addr+"/")
	}
	return out
}

// addrsFrom is RABBITMQ_ADDRS starting with node first.
func (cl *localCluster) addrsFrom(first int) string {
	var out []string
	for i := range cl.addrs {
		out = append(out, cl.addrs[(first-1+i)%len(cl.addrs)])
	}
	return strings.Join(out, ",")
}

// redisMaster is the host:port the Sentinels name as master ("" when
// none answers).
func (cl *localCluster) redisMaster(t *testing.T) string {
	t.Helper()
	for _, addr := range strings.Split(cl.env["REDIS_SENTINEL_ADDRS"], ",") {
		s := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		m, err := s.GetMasterAddrByName(context.Background(), cl.env["REDIS_SENTINEL_MASTER"]).Result()
		_ = s.Close()
		if err == nil && len(m) == 2 {
			return m[0] + ":" + m[1]
		}
	}
	return ""
}

// queueNode asks the management API of the first node that answers which
// node holds queue (a classic queue's home, a quorum queue's leader).
func (cl *localCluster) queueNode(t *testing.T, queue string) string {
	t.Helper()
	for _, base := range strings.Split(cl.env["RABBITMQ_MANAGEMENT_URL"], ",") {
		req, err := http.NewRequest(http.MethodGet, base+"/api/queues/%2F/"+url.PathEscape(queue), nil)
		require.NoError(t, err)
		req.SetBasicAuth("guest", "guest")
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			continue
		}
		var q struct{ Node, Leader string }
		err = json.NewDecoder(resp.Body).Decode(&q)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return cmp.Or(q.Leader, q.Node)
		}
	}
	t.Fatalf("no management API of the cluster answers for queue %s", queue)
	return ""
}

// phase runs one fleet on the cluster with queues of queueType under load
// while the faults come one after another, then settles and checks it.
func (cl *localCluster) phase(t *testing.T, seed uint64, queueType string, faults []clusterFault) {
	t.Helper()
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	e["RABBITMQ_ADDRS"] = cl.addrsFrom(1)
	e["RABBITMQ_MANAGEMENT_URL"] = cl.env["RABBITMQ_MANAGEMENT_URL"]
	e["REDIS_SENTINEL_ADDRS"], e["REDIS_SENTINEL_MASTER"] = cl.env["REDIS_SENTINEL_ADDRS"], cl.env["REDIS_SENTINEL_MASTER"]
	tp, err := topology.New(topology.Config{Prefix: e["RABBITMQ_NAME_PREFIX"]})
	require.NoError(t, err)
	if queueType == topology.QueueQuorum {
		e["RABBITMQ_QUEUE_TYPE"] = topology.QueueQuorum
		// The replication queue is a priority queue: it stays classic.
		d, _ := tp.Domain(topology.DomainObjectReplication)
		e["RABBITMQ_CLASSIC_QUEUES"] = d.Queue
	}
	billing, _ := tp.Domain(topology.DomainAgentBilling)
	cl.billingQueue = billing.Queue

	rdb, err := store.OpenRedis(store.RedisConfig{SentinelAddrs: strings.Split(e["REDIS_SENTINEL_ADDRS"], ","),
		SentinelMaster: e["REDIS_SENTINEL_MASTER"], KeyPrefix: e["REDIS_KEY_PREFIX"]})
	require.NoError(t, err)
	t.Cleanup(func() { storetest.Wipe(t, rdb); rdb.Close() })
	chargers, payers, uploaders := chaosUsers("bill", 20), chaosUsers("pay", 8), chaosUsers("obj", 10)
	w := newChaosWorld(t, e, rdb, slices.Concat(chargers, payers, uploaders))

	// The queues are declared through node 1, so a classic queue lives
	// there and a quorum queue's leader starts there; each binary
	// connects first to another node: the api and the relay to node 2, the
	// workers and the reconciler to node 3.
	out, code := islectl(t, e, "topology", "apply")
	require.Zero(t, code, out)
	t.Cleanup(func() { cl.deleteTopology(t, e["RABBITMQ_NAME_PREFIX"]) })
	fe := w.fleetEnv(t)
	fleet := newChaosFleet(fe)
	for _, m := range fleet.members() {
		m.env = withEnv(fe, "RABBITMQ_ADDRS", cl.addrsFrom(3))
	}
	fleet.api.env = withEnv(fe, "RABBITMQ_ADDRS", cl.addrsFrom(2))
	fleet.relay.env = fleet.api.env
	fleet.start(t)

	l := w.load(t, fe["API_ADDR"], slices.Concat(payers, uploaders))
	l.notifyTries = 60 // half a minute: longer than a node's restart
	rec := &record{http: map[string]map[int]int{}}
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	stream := uint64(0)
	rng := func() *rand.Rand { stream++; return rand.New(rand.NewPCG(seed, stream)) }
	for g := range 6 { // five charge one call at a time, one in batches
		r := rng()
		if g < 5 {
			wg.Go(func() { l.chargeLoop(ctx, r, chargers, rec, g) })
		} else {
			wg.Go(func() { l.batchLoop(ctx, r, chargers, rec, g) })
		}
	}
	for _, u := range payers {
		r := rng()
		wg.Go(func() { l.payLoop(ctx, r, u, rec) })
	}
	for _, u := range uploaders {
		// Five uploads an hour each: spread over the phase.
		r := rng()
		wg.Go(func() {
			sleep(ctx, time.Duration(r.IntN(20*len(faults)))*time.Second)
			l.uploadLoop(ctx, r, u, rec)
		})
	}

	var spans []faultSpan
	cl.awaitServing(t, rec, time.Now(), "the load's first charges")
	for _, f := range faults {
		sleep(ctx, 3*time.Second)
		s := faultSpan{name: f.name, start: time.Now()}
		f.inject(t)
		time.Sleep(f.hold)
		cl.script(t, "up")
		s.restored = time.Now()
		cl.awaitServing(t, rec, s.restored, f.name)
		spans = append(spans, s)
	}
	sleep(ctx, 5*time.Second)
	stopLoad()
	wg.Wait()

	printWindows(os.Stdout, queueType, unavailability(rec, spans))
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.name
	}
	// The drain's connection is opened now: one opened before could have
	// been on a node the faults killed.
	conn := cl.dial(t)
	w.settle(t, conn, fleet, l, rec, seed, names)
}

// dial connects to the first node that answers.
func (cl *localCluster) dial(t *testing.T) *amqp.Connection {
	t.Helper()
	conn, _, err := messaging.DialFirst(cl.urls(1), 0, amqp.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// withEnv is a copy of e with k set to v.
func withEnv(e fleetEnv, k, v string) fleetEnv {
	c := maps.Clone(e)
	c[k] = v
	return c
}

// awaitServing waits until a charge answered after since was a 200: the
// fleet serves again.
func (cl *localCluster) awaitServing(t *testing.T, rec *record, since time.Time, after string) {
	t.Helper()
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for i := len(rec.answers) - 1; i >= 0 && rec.answers[i].at.After(since); i-- {
			if a := rec.answers[i]; a.domain == "billing" && a.status == http.StatusOK {
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "no charge answered 200 after %s", after)
}

// deleteTopology removes a phase's queues and exchanges from the cluster.
func (cl *localCluster) deleteTopology(t *testing.T, prefix string) {
	t.Helper()
	storetest.DeleteTopology(t, cl.dial(t), prefix)
}

// faultSpan is when a fault began and when what it killed was started
// again.
type faultSpan struct {
	name            string
	start, restored time.Time
}

// window is what one domain's clients were answered around one fault,
// from the fault to the later of the restart and the first plain answer
// after a bad one (refused, or a charge deferred to the outbox): out is
// from the first bad answer to that plain one (the first 200 again), bad
// from the first bad answer to the last; their number, and the slowest
// answer.
type window struct {
	fault, domain     string
	out, bad          time.Duration // 0: no bad answer
	stayedOut         bool          // no plain answer after the last bad one, before the next fault
	restart           time.Duration // from the fault to what it killed started again
	answers           int
	refused, deferred int
	slowest           time.Duration
}

// unavailability is the windows of every fault, per domain.
func unavailability(rec *record, spans []faultSpan) []window {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []window
	for i, s := range spans {
		next := time.Now() // the next fault's start: what comes from then on is that fault's
		if i+1 < len(spans) {
			next = spans[i+1].start
		}
		byDomain := map[string][]answer{}
		for _, a := range rec.answers {
			if !a.at.Before(s.start) && a.at.Before(next) {
				byDomain[a.domain] = append(byDomain[a.domain], a)
			}
		}
		for _, domain := range slices.Sorted(maps.Keys(byDomain)) {
			out = append(out, faultWindow(s, domain, byDomain[domain]))
		}
	}
	return out
}

func faultWindow(s faultSpan, domain string, answers []answer) window {
	w := window{fault: s.name, domain: domain, restart: s.restored.Sub(s.start)}
	var first, back, last, lastPlain time.Time
	for _, a := range answers {
		switch {
		case a.refused || a.deferred:
			if first.IsZero() {
				first = a.at
			}
			last = a.at
		case !first.IsZero() && back.IsZero():
			back, lastPlain = a.at, a.at
		default:
			lastPlain = a.at
		}
	}
	if !first.IsZero() {
		w.bad = max(last.Sub(first), time.Millisecond)
		w.stayedOut = lastPlain.Before(last)
	}
	if !back.IsZero() {
		w.out = back.Sub(first)
	}
	until := s.restored
	for _, t := range []time.Time{back, last} {
		if t.After(until) {
			until = t
		}
	}
	for _, a := range answers {
		if a.at.After(until) {
			break
		}
		w.answers++
		if a.refused {
			w.refused++
		}
		if a.deferred {
			w.deferred++
		}
		w.slowest = max(w.slowest, a.took)
	}
	return w
}

func printWindows(f *os.File, queueType string, ws []window) {
	fmt.Fprintf(f, "\nPer fault and domain (%s queues). out: from the first answer refused (5xx, none, or \"fail\" to a callback) or deferred\n"+
		"(a charge whose messages wait in the outbox) to the first plain answer again; bad: from the first such answer to the last\n", queueType)
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tkilled to restarted\tdomain\tout\tbad\tanswers\trefused\tdeferred\tslowest")
	last := ""
	for _, w := range ws {
		fault, restart := w.fault, w.restart.Round(100*time.Millisecond).String()
		if fault == last {
			fault, restart = "", ""
		}
		last = w.fault
		out := "never"
		switch {
		case w.stayedOut:
			out = "until the next fault"
		case w.out > 0:
			out = w.out.Round(10 * time.Millisecond).String()
		}
		bad := "-"
		if w.bad > 0 {
			bad = w.bad.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", fault, restart, w.domain, out, bad, w.answers, w.refused, w.deferred,
			w.slowest.Round(time.Millisecond))
	}
	_ = tw.Flush()
}
