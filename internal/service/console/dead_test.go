package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The list filters by domain, reason, time and state; one message's page
// shows its headers, its body indented and its earlier deaths.
func TestDeadMessagesListFiltersAndShowsOne(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	now := time.Now()
	billing := b.deadMessage(t, topology.DomainAgentBilling, "m-bill", `{"deductionId":"d-1","username":"bob","amountFen":"0.5"}`, "ledger unavailable", now.Add(-2*time.Hour))
	again := b.deadMessage(t, topology.DomainAgentBilling, "m-bill", `{"deductionId":"d-1","username":"bob","amountFen":"0.5"}`, "ledger still unavailable", now.Add(-time.Hour))
	email := b.deadMessage(t, topology.DomainEmail, "m-mail", `{"email":"a@example.com"}`, "permanent: bad address", now.Add(-3*24*time.Hour))

	_, body := b.get(t, "/admin/dead")
	for _, ref := range []string{fmt.Sprint("agent-billing/", billing), fmt.Sprint("agent-billing/", again), fmt.Sprint("email/", email)} {
		require.Contains(t, body, `value="`+ref+`"`)
	}
	require.Less(t, strings.Index(body, fmt.Sprint("agent-billing/", again)), strings.Index(body, fmt.Sprint("agent-billing/", billing)), "newest first")

	for query, want := range map[string][]string{
		"?domain=email":                       {"email/"},
		"?reason=" + url.QueryEscape("still"): {fmt.Sprint("agent-billing/", again)},
		"?since=90m":                          {fmt.Sprint("agent-billing/", again)},
		"?since=1d&domain=agent-billing":      {"agent-billing/"},
	} {
		t.Run(query, func(t *testing.T) {
			status, body := b.get(t, "/admin/dead"+query)
			require.Equal(t, http.StatusOK, status)
			n := strings.Count(body, `name="ref" value="`)
			if strings.Contains(query, "domain=agent-billing") {
				require.Equal(t, 2, n)
			} else {
				require.Equal(t, 1, n)
			}
			for _, w := range want {
				require.Contains(t, body, `name="ref" value="`+w)
			}
		})
	}
	for _, bad := range []string{"?domain=nope", "?since=yesterday", "?state=gone", "?before=x.y"} {
		t.Run(bad, func(t *testing.T) {
			status, _ := b.get(t, "/admin/dead"+bad)
			require.Equal(t, http.StatusBadRequest, status)
		})
	}

	status, body := b.get(t, fmt.Sprint("/admin/dead/agent-billing/", again))
	require.Equal(t, http.StatusOK, status)
	body = html.UnescapeString(body)
	for _, want := range []string{
		"Retries</dt><dd>5 of 5",
		"retries exhausted",
		`Trace</dt><dd id="trace">4bf92f3577b34da6a3ce929d0e0e4736</dd>`, // of its traceparent
		"<th>__TypeId__</th>",
		"\"deductionId\": \"d-1\",\n  \"username\": \"bob\"",
		fmt.Sprint(`href="/admin/dead/agent-billing/`, billing, `"`), // the earlier death, in the history
		"ledger still unavailable",
	} {
		require.Contains(t, body, want)
	}
	status, _ = b.get(t, "/admin/dead/agent-billing/99999")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.get(t, "/admin/dead/nope/1")
	require.Equal(t, http.StatusNotFound, status)
}

// A replay from the page sends the message to its domain's main queue
// once, marks it replayed, shows the result, and logs the operator.
func TestReplayFromThePage(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.deadMessage(t, topology.DomainEmail, "m-1", `{"email":"a@example.com"}`, "smtp down", time.Now())
	other := b.deadMessage(t, topology.DomainEmail, "m-2", `{"email":"b@example.com"}`, "smtp down", time.Now())
	ref := fmt.Sprint("email/", id)
	dom, _ := b.tp.Domain(topology.DomainEmail)

	token := b.csrf(t, "/admin/dead/"+ref)
	status, body := b.post(t, "/admin/dead/replay", url.Values{"csrf": {token}, "ref": {ref, fmt.Sprint("email/", other)}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "2 selected: 0 not replayed")
	require.True(t, b.replayed(t, topology.DomainEmail, id))
	require.Eventually(t, func() bool { return storetest.QueueDepth(t, b.conn, dom.Queue) == 2 }, 5*time.Second, 50*time.Millisecond)
	require.Contains(t, b.logs.String(), `msg="console: replay" operator=alice ref=`+ref+" force=false ok=true")

	status, body = b.post(t, "/admin/dead/replay", url.Values{"csrf": {token}, "ref": {ref}})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "replayed before")
	status, body = b.post(t, "/admin/dead/replay", url.Values{"csrf": {token}, "ref": {ref}, "force": {"on"}})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "1 selected: 0 not replayed")
	require.Eventually(t, func() bool { return storetest.QueueDepth(t, b.conn, dom.Queue) == 3 }, 5*time.Second, 50*time.Millisecond)

	status, _ = b.post(t, "/admin/dead/replay", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusBadRequest, status, "nothing selected")
	status, _ = b.post(t, "/admin/dead/replay", url.Values{"csrf": {token}, "ref": {"email/x"}})
	require.Equal(t, http.StatusBadRequest, status)
}

// A replay without the form's CSRF token, with another session's, with
// another operator's, or from another site is refused and changes nothing.
func TestReplayWithoutTheCSRFTokenChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.deadMessage(t, topology.DomainEmail, "m-1", `{"email":"a@example.com"}`, "smtp down", time.Now())
	ref := fmt.Sprint("email/", id)
	dom, _ := b.tp.Domain(topology.DomainEmail)
	token := b.csrf(t, "/admin/dead")

	other := setup(t, options{})
	otherToken := other.csrf(t, "/admin/dead")
	for name, try := range map[string]func(t *testing.T) (int, string){
		"no token": func(t *testing.T) (int, string) {
			t.Helper()
			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}})
		},
		"empty token": func(t *testing.T) (int, string) {
			t.Helper()

			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {""}})
		},
		"forged token": func(t *testing.T) (int, string) {
			t.Helper()

			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {strings.Repeat("A", 43)}})
		},
		"other console": func(t *testing.T) (int, string) {
			t.Helper()

			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {otherToken}})
		},
		"other operator": func(t *testing.T) (int, string) {
			t.Helper()

			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {token}}, "X-Test-Operator", "mallory")
		},
		"other site": func(t *testing.T) (int, string) {
			t.Helper()

			return b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {token}}, "Origin", "https://evil.example")
		},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := try(t)
			require.Equal(t, http.StatusForbidden, status)
			require.Contains(t, body, "nothing was done")
		})
	}
	// Without its cookie, a token alone is refused too.
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/admin/dead/replay", strings.NewReader(url.Values{"ref": {ref}, "csrf": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.False(t, b.replayed(t, topology.DomainEmail, id))
	require.Contains(t, b.logs.String(), `msg="console: action refused"`)
	status, _ := b.post(t, "/admin/dead/replay", url.Values{"ref": {ref}, "csrf": {token}})
	require.Equal(t, http.StatusOK, status, "the right token still works")
	require.True(t, b.replayed(t, topology.DomainEmail, id))
	// Nothing was published before: the queue holds the one message the
	// right token sent, and anything published ahead of it.
	require.Equal(t, []string{"m-1"}, takeAll(t, b.conn, dom.Queue))
}

// takeAll takes every message off queue, once one is there, and returns
// their ids in order.
func takeAll(t *testing.T, conn *amqp.Connection, queue string) []string {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var ids []string
	take := func() bool {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if ok {
			ids = append(ids, d.MessageId)
		}
		return ok
	}
	require.Eventually(t, take, 5*time.Second, 20*time.Millisecond, "nothing in %s", queue)
	for take() {
	}
	return ids
}
