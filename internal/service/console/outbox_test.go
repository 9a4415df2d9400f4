package console_test

import (
	"html"
	"net/http"
	"net/url"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// The outbox page lists the rows the relay parked, with why; replaying
// them (selected, or every one of a table) makes them due again, once, and
// is refused without the CSRF token.
func TestParkedOutboxRowsAreListedAndReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	status, body := b.get(t, "/admin/outbox")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "outbox: 0 parked")

	require.NoError(t, b.db.Exec(`INSERT INTO outbox (id, message_id, domain, payload, headers, attempts, last_error, parked_at, available_at) VALUES
		(41, 'm41', 'no-such-domain', '{}', '{}', 1, 'relay: outbox 41: no topology domain "no-such-domain"', NOW(6), ?),
		(42, 'm42', 'payment-receipt', '{}', 'nope', 2, 'relay: outbox 42: headers: invalid character', NOW(6), ?)`,
		store.OutboxParkedUntil, store.OutboxParkedUntil).Error)
	require.NoError(t, b.db.Exec(`INSERT INTO object_outbox (id, object_id, event_type, priority, attempts, last_error, parked_at, available_at)
		VALUES (5, 999, 'REPLICATE', 1, 1, 'relay: object_outbox 5: object 999 does not exist', NOW(6), ?)`, store.OutboxParkedUntil).Error)
	status, body = b.get(t, "/admin/outbox")
	require.Equal(t, http.StatusOK, status)
	body = html.UnescapeString(body)
	require.Contains(t, body, "outbox: 2 parked")
	require.Contains(t, body, "object_outbox: 1 parked")
	require.Contains(t, body, `no topology domain "no-such-domain"`)
	require.Contains(t, body, "object 999")

	status, _ = b.post(t, "/admin/outbox/replay", url.Values{"table": {"outbox"}, "id": {"41"}})
	require.Equal(t, http.StatusForbidden, status)
	token := b.csrf(t, "/admin/outbox")
	status, body = b.post(t, "/admin/outbox/replay", url.Values{"csrf": {token}, "table": {"outbox"}, "id": {"41"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "1 selected: 1 due again")
	require.Contains(t, b.logs.String(), `msg="console: outbox rows replayed" operator=alice table=outbox ids=[41]`)
	status, body = b.post(t, "/admin/outbox/replay", url.Values{"csrf": {token}, "table": {"outbox"}, "id": {"41"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "0 due again", "replayed once")
	status, body = b.post(t, "/admin/outbox/replay", url.Values{"csrf": {token}, "table": {"object_outbox"}, "all": {"1"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Every parked row of object_outbox: 1 due again")
	status, _ = b.post(t, "/admin/outbox/replay", url.Values{"csrf": {token}, "table": {"user_account"}, "all": {"1"}})
	require.Equal(t, http.StatusBadRequest, status)

	var parked int
	require.NoError(t, b.db.Raw("SELECT (SELECT COUNT(*) FROM outbox WHERE parked_at IS NOT NULL) + (SELECT COUNT(*) FROM object_outbox WHERE parked_at IS NOT NULL)").Scan(&parked).Error)
	require.Equal(t, 1, parked, "row 42 only")
}
