package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The overview lists every queue of the topology with the broker's counts,
// highlights a DLQ that holds messages, and shows the health of each
// dependency and binary: a binary that answers its /healthz, one that does
// not, and one that serves none.
func TestOverviewShowsEveryQueueAndTheFleetsHealth(t *testing.T) {
	t.Parallel()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer healthy.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"unavailable","failed":{"mysql":"down"}}`, http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	b := setup(t, options{probes: []console.Probe{
		{Name: "worker", URL: healthy.URL + "/healthz"},
		{Name: "relay", URL: sick.URL + "/healthz"},
		{Name: "reconcile", URL: ""},
	}})

	dom, _ := b.tp.Domain(topology.DomainEmail)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	for range 2 {
		require.NoError(t, ch.Publish(dom.Exchange, dom.DLQKey, false, false, amqp.Publishing{Body: []byte(`{}`)}))
	}
	var body string
	require.Eventually(t, func() bool {
		var status int
		status, body = b.get(t, "/admin/")
		require.Equal(t, http.StatusOK, status)
		return strings.Contains(body, `<tr class="role-dlq alert" data-queue="`+dom.DLQ+`">`)
	}, 20*time.Second, 200*time.Millisecond, "the DLQ holding 2 messages is highlighted")
	for _, q := range b.tp.Queues() {
		require.Contains(t, body, `data-queue="`+q.Name+`"`)
	}
	for _, want := range []string{
		`<td>MySQL</td><td><span class="badge ok">ok</span>`,
		`<td>Redis</td><td><span class="badge ok">ok</span>`,
		`<td>RabbitMQ (AMQP)</td><td><span class="badge ok">ok</span>`,
		`<td>RabbitMQ (management API)</td><td><span class="badge ok">ok</span>`,
		`<td>worker</td><td><span class="badge ok">ok</span>`,
		`<td>relay</td><td><span class="badge failing">failing</span>`,
		`503 Service Unavailable`,
		`<td>reconcile</td><td><span class="badge off">off</span>`,
		`<svg class="spark"`,
	} {
		require.Contains(t, body, want)
	}
}

// The sparkline draws the samples the console keeps: each sample adds a
// point, and the oldest fall out of the window.
func TestRunSamplesForTheSparklines(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	go b.console.Run(ctx)
	require.Eventually(t, func() bool {
		_, body := b.get(t, "/admin/")
		return strings.Contains(body, "samples)</title>") && !strings.Contains(body, "(1 samples)")
	}, 10*time.Second, 100*time.Millisecond)
}

func TestUnknownPageIs404(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, body := b.get(t, "/admin/nope")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "no page /admin/nope")
}
