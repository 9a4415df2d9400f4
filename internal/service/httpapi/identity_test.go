package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

func TestIdentityPassWritesItsMaterialMessageOnce(t *testing.T) {
	b := setup(t, options{})
	svc, user := b.token(t, "verifier", httpapi.RoleService), b.token(t, "ivy", httpapi.RoleUser)

	status, _, body := b.do(t, http.MethodGet, "/v1/identity/status", user, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, false, body["verified"])

	pass := `{"username":"ivy","status":"PASSED","materialInfo":"{\"enc\":\"abc\"}"}`
	for range 2 { // the same pass twice: one message
		status, _, body = b.do(t, http.MethodPost, "/v1/identity/verifications/cert-1/result", svc, pass)
		require.Equal(t, http.StatusOK, status, "%v", body)
		require.Equal(t, "PASSED", body["status"])
		require.Equal(t, true, body["materialQueued"])
	}
	var rows []store.OutboxMessage
	require.NoError(t, b.db.Where("domain = ?", topology.DomainIdentityMaterial).Find(&rows).Error)
	require.Len(t, rows, 1)
	d, _ := b.tp.Domain(topology.DomainIdentityMaterial)
	require.Equal(t, d.TypeID, rows[0].MessageType)
	var msg topology.IdentityMaterial
	require.NoError(t, json.Unmarshal(rows[0].Payload, &msg))
	require.Equal(t, topology.IdentityMaterial{Username: "ivy", CertifyID: "cert-1", MaterialInfo: `{"enc":"abc"}`}, msg)
	require.Nil(t, rows[0].PublishedAt)

	// The cached "not verified" read before the pass does not hide it.
	status, _, body = b.do(t, http.MethodGet, "/v1/identity/status", user, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, body["verified"])

	// A failure after the pass changes nothing; that was the third result
	// for ivy in 5 minutes, and the fourth is refused.
	status, _, body = b.do(t, http.MethodPost, "/v1/identity/verifications/cert-1/result", svc, `{"username":"ivy","status":"FAILED"}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "PASSED", body["status"])
	status, _, body = b.do(t, http.MethodPost, "/v1/identity/verifications/cert-2/result", svc, `{"username":"ivy","status":"FAILED"}`)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, httpapi.CodeRateLimited, errorCode(t, body))
}

func TestIdentityResultRefusals(t *testing.T) {
	b := setup(t, options{})
	svc := b.token(t, "verifier", httpapi.RoleService)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/identity/verifications/cert-9/result", `{"username":"amy","status":"PASSED"}`, http.StatusBadRequest},
		{"/v1/identity/verifications/cert-9/result", `{"username":"amy","status":"MAYBE"}`, http.StatusBadRequest},
		{"/v1/identity/verifications/cert%20x/result", `{"username":"amy","status":"FAILED"}`, http.StatusBadRequest},
		{"/v1/identity/verifications/cert-9/result", `{"username":"","status":"FAILED"}`, http.StatusBadRequest},
	} {
		status, _, body := b.do(t, http.MethodPost, c.path, svc, c.body)
		require.Equal(t, c.status, status, "%s %s: %v", c.path, c.body, body)
	}
	status, _, _ := b.do(t, http.MethodPost, "/v1/identity/verifications/cert-9/result", b.token(t, "amy", httpapi.RoleUser),
		`{"username":"amy","status":"FAILED"}`)
	require.Equal(t, http.StatusForbidden, status, "users do not record their own results")

	status, _, body := b.do(t, http.MethodPost, "/v1/identity/verifications/cert-9/result", svc, `{"username":"amy","status":"FAILED"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, false, body["materialQueued"])
	status, _, body = b.do(t, http.MethodPost, "/v1/identity/verifications/cert-9/result", svc,
		`{"username":"bob","status":"PASSED","materialInfo":"x"}`)
	require.Equal(t, http.StatusConflict, status, "%v", body)
	var n int64
	require.NoError(t, b.db.Model(&store.OutboxMessage{}).Count(&n).Error)
	require.Zero(t, n, "no refused result wrote a message")
}
