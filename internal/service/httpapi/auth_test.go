package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/golang-jwt/jwt/v5"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestTokensThatAreNotValidAre401(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		require.NoError(t, err)
		return s
	}
	valid := jwt.MapClaims{"sub": "alice", "role": "user", "exp": time.Now().Add(time.Hour).Unix()}
	expired := jwt.MapClaims{"sub": "alice", "role": "user", "exp": time.Now().Add(-time.Hour).Unix()}
	noExp := jwt.MapClaims{"sub": "alice", "role": "user"}
	badRole := jwt.MapClaims{"sub": "alice", "role": "root", "exp": time.Now().Add(time.Hour).Unix()}
	noneToken := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid)
	forged := sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), valid)
	tampered := b.token(t, "alice", httpapi.RoleUser)
	parts := strings.Split(tampered, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","role":"admin","exp":9999999999}`))
	for name, tok := range map[string]string{
		"missing":         "",
		"garbage":         "not.a.token",
		"expired":         sign(jwt.SigningMethodHS256, secret, expired),
		"no expiry":       sign(jwt.SigningMethodHS256, secret, noExp),
		"forged":          forged,
		"tampered":        strings.Join(parts, "."),
		"alg none":        noneToken,
		"wrong algorithm": sign(jwt.SigningMethodHS512, secret, valid),
		"unknown role":    sign(jwt.SigningMethodHS256, secret, badRole),
	} {
		status, h, body := b.do(t, http.MethodGet, "/v1/me", tok, "")
		require.Equal(t, http.StatusUnauthorized, status, name)
		require.Equal(t, "unauthorized", errorCode(t, body), name)
		require.Contains(t, h.Get("WWW-Authenticate"), "Bearer", name)
	}
	// A small clock skew is allowed.
	skewed := jwt.MapClaims{"sub": "alice", "role": "user", "exp": time.Now().Add(-10 * time.Second).Unix()}
	status, _, _ := b.do(t, http.MethodGet, "/v1/me", sign(jwt.SigningMethodHS256, secret, skewed), "")
	require.Equal(t, http.StatusOK, status)
}

func TestRolesAndBans(t *testing.T) {
	t.Parallel()
	b := setup(t, options{routes: []httpapi.Route{{
		Method: http.MethodPost, Path: "/test/admin", Roles: []httpapi.Role{httpapi.RoleAdmin},
		Handle: func(w http.ResponseWriter, r *http.Request) error {
			return httpapi.JSON(w, http.StatusOK, map[string]string{})
		},
	}}})
	status, _, body := b.do(t, http.MethodPost, "/test/admin", b.token(t, "alice", httpapi.RoleUser), "")
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "forbidden", errorCode(t, body))
	status, _, _ = b.do(t, http.MethodPost, "/test/admin", b.token(t, "ops", httpapi.RoleAdmin), "")
	require.Equal(t, http.StatusOK, status)

	_, err := store.NewAccounts(b.db).Create(t.Context(), "alice", "alice@example.com", decimal.RequireFromString("12.5"))
	require.NoError(t, err)
	status, _, body = b.do(t, http.MethodGet, "/v1/me", b.token(t, "alice", httpapi.RoleUser), "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "12.50000000", body["account"].(map[string]any)["balanceFen"])

	require.NoError(t, store.NewBans(b.db, b.redis).Ban(t.Context(), "alice", "abuse"))
	status, _, body = b.do(t, http.MethodGet, "/v1/me", b.token(t, "alice", httpapi.RoleUser), "")
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body["error"].(map[string]any)["message"], "banned")
	// Others are not caught by the Bloom filter.
	status, _, _ = b.do(t, http.MethodGet, "/v1/me", b.token(t, "alicia", httpapi.RoleUser), "")
	require.Equal(t, http.StatusOK, status)

	was, err := store.NewBans(b.db, b.redis).Unban(t.Context(), "alice")
	require.NoError(t, err)
	require.True(t, was)
	status, _, _ = b.do(t, http.MethodGet, "/v1/me", b.token(t, "alice", httpapi.RoleUser), "")
	require.Equal(t, http.StatusOK, status)
}

// With Redis unreachable the ban check lets requests through, and counts them.
func TestBanCheckFailsOpen(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, storetest.RedisAddr())
	b := setup(t, options{redisAddr: proxy.Addr()})
	proxy.Down()
	began := time.Now()
	status, _, _ := b.do(t, http.MethodGet, "/v1/me", b.token(t, "bob", httpapi.RoleService), "")
	require.Equal(t, http.StatusOK, status)
	require.Less(t, time.Since(began), 3*time.Second, "the check gives up quickly")
	require.EqualValues(t, 1, b.metric(t, "isle_ban_check_fail_open_total", nil))
}
