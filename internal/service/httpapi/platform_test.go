package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
)

// The OpenAPI document is valid OpenAPI 3 and lists exactly the routes the
// router serves.
func TestOpenAPIListsExactlyTheRoutesServed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, _, _ := b.do(t, http.MethodGet, "/openapi.json", "", "")
	require.Equal(t, http.StatusOK, status)
	resp, err := http.Get(b.http.URL + "/openapi.json")
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	var served []string
	require.NoError(t, chi.Walk(b.srv.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	}))
	sort.Strings(documented)
	sort.Strings(served)
	require.Equal(t, served, documented)
	require.Len(t, b.srv.Routes(), len(served), "a route is in the table once")
	// Each documented operation that needs a token declares it.
	for _, rt := range b.srv.Routes() {
		op := doc.Paths.Find(rt.Path).GetOperation(rt.Method)
		require.NotNil(t, op, rt.Path)
		require.Equal(t, len(rt.Roles) > 0, op.Security != nil && len(*op.Security) > 0, "security of %s %s", rt.Method, rt.Path)
	}
}

func TestErrorModelAndCorrelationID(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, h, body := b.do(t, http.MethodGet, "/nope", "", "")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "not_found", errorCode(t, body))
	require.NotEmpty(t, h.Get("X-Request-Id"))
	status, _, body = b.do(t, http.MethodPost, "/healthz", "", "")
	require.Equal(t, http.StatusMethodNotAllowed, status)
	require.Equal(t, "method_not_allowed", errorCode(t, body))
	_, h, _ = b.do(t, http.MethodGet, "/healthz", "", "", "X-Request-Id", "req-123")
	require.Equal(t, "req-123", h.Get("X-Request-Id"))
	_, h, _ = b.do(t, http.MethodGet, "/healthz", "", "", "X-Correlation-Id", "corr-9")
	require.Equal(t, "corr-9", h.Get("X-Request-Id"))
	_, h, _ = b.do(t, http.MethodGet, "/healthz", "", "", "X-Request-Id", "bad id with spaces")
	require.NotEqual(t, "bad id with spaces", h.Get("X-Request-Id"))
	require.EqualValues(t, 1, b.metric(t, "isle_http_requests_total", map[string]string{"route": "unmatched", "status": "404"}))
	require.EqualValues(t, 3, b.metric(t, "isle_http_requests_total", map[string]string{"route": "/healthz", "status": "200"}))
}

func TestOversizedBodyIs413(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxBody: 1024, routes: []httpapi.Route{{
		Method: http.MethodPost, Path: "/test/echo", Handle: func(w http.ResponseWriter, r *http.Request) error {
			var v map[string]any
			if err := httpapi.DecodeJSON(r, &v); err != nil {
				return err
			}
			return httpapi.JSON(w, http.StatusOK, v)
		},
	}}})
	big := `{"x":"` + strings.Repeat("a", 2000) + `"}`
	status, _, body := b.do(t, http.MethodPost, "/test/echo", "", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "declared length")
	require.Equal(t, "payload_too_large", errorCode(t, body))

	// A chunked body without a length is cut off while it is read.
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte(big)); pw.Close() }()
	req, err := http.NewRequest(http.MethodPost, b.http.URL+"/test/echo", pr)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	status, _, body = b.do(t, http.MethodPost, "/test/echo", "", `{"x": 1} trailing`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "bad_request", errorCode(t, body))
	status, _, _ = b.do(t, http.MethodPost, "/test/echo", "", `{"x": 1}`)
	require.Equal(t, http.StatusOK, status)
}

// /readyz is not ready while RabbitMQ is unreachable, and ready again after.
func TestReadinessFollowsRabbitMQ(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	b := setup(t, options{amqpURL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)})
	status, _, body := b.do(t, http.MethodGet, "/readyz", "", "")
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, map[string]any{"mysql": "ok", "redis": "ok", "rabbitmq": "ok"}, body["checks"])

	proxy.Down()
	require.Eventually(t, func() bool {
		status, _, body = b.do(t, http.MethodGet, "/readyz", "", "")
		return status == http.StatusServiceUnavailable
	}, 10*time.Second, 100*time.Millisecond)
	require.NotEqual(t, "ok", body["checks"].(map[string]any)["rabbitmq"])
	require.Equal(t, "ok", body["checks"].(map[string]any)["mysql"])

	proxy.Up()
	require.Eventually(t, func() bool {
		status, _, _ = b.do(t, http.MethodGet, "/readyz", "", "")
		return status == http.StatusOK
	}, 20*time.Second, 200*time.Millisecond)
}

// A request that publishes gets 503 within the publish timeout when the
// broker does not confirm, never a hang; the message carries the request's
// correlation id.
func TestPublishingFromARequest(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	var b *testBundle
	b = setup(t, options{amqpURL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1), routes: []httpapi.Route{{
		Method: http.MethodPost, Path: "/test/publish", Roles: httpapi.Roles,
		Handle: func(w http.ResponseWriter, r *http.Request) error {
			id := int64(7)
			if err := b.srv.Publish(r, topology.ObjectReplication{TaskID: &id}, messaging.Options{}); err != nil {
				return err
			}
			return httpapi.JSON(w, http.StatusAccepted, map[string]string{"status": "queued"})
		},
	}}})
	tok := b.token(t, "svc", httpapi.RoleService)
	status, _, _ := b.do(t, http.MethodPost, "/test/publish", tok, "", "X-Request-Id", "req-pub-1")
	require.Equal(t, http.StatusAccepted, status)
	dom, _ := b.tp.Domain(topology.DomainObjectReplication)
	conn, _ := storetest.AMQP(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	d, got, err := ch.Get(dom.Queue, true)
	require.NoError(t, err)
	require.True(t, got)
	require.Equal(t, "req-pub-1", d.Headers["x-trace-id"])
	var body map[string]any
	require.NoError(t, json.Unmarshal(d.Body, &body))
	require.EqualValues(t, 7, body["taskId"])

	proxy.Pause()
	began := time.Now()
	status, h, errBody := b.do(t, http.MethodPost, "/test/publish", tok, "")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "unavailable", errorCode(t, errBody))
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Less(t, time.Since(began), 3*time.Second, "the publish timeout (500 ms) bounds the wait")
	proxy.Resume()
}
