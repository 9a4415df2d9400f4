package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// takeCode takes the next EmailCodeDispatchMessage off the email queue.
func (b *testBundle) takeCode(t *testing.T) topology.EmailCodeDispatch {
	t.Helper()
	conn, _ := b.conn(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	d, _ := b.tp.Domain(topology.DomainEmail)
	var msg topology.EmailCodeDispatch
	require.Eventually(t, func() bool {
		got, ok, err := ch.Get(d.Queue, true)
		require.NoError(t, err)
		if ok {
			require.NoError(t, json.Unmarshal(got.Body, &msg))
		}
		return ok
	}, 5*time.Second, 20*time.Millisecond)
	return msg
}

func TestEmailCodeSentVerifiedAndUsedUp(t *testing.T) {
	b := setup(t, options{})
	status, _, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", `{"email":"Ann@example.com","scene":"LOGIN"}`)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	msg := b.takeCode(t)
	require.Equal(t, "Ann@example.com", msg.Email)
	require.Equal(t, "LOGIN", msg.Scene)
	require.Regexp(t, `^[0-9]{6}$`, msg.Code)

	status, headers, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", `{"email":"ann@example.com","scene":"LOGIN"}`)
	require.Equal(t, http.StatusTooManyRequests, status, "the 60 s cooldown, whatever the case: %v", body)
	require.Equal(t, "cooldown", body["error"].(map[string]any)["limit"])
	retry := headers.Get("Retry-After")
	require.Contains(t, []string{"58", "59", "60"}, retry)

	wrong := "000000"
	if msg.Code == wrong {
		wrong = "999999"
	}
	status, _, body = b.do(t, http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"LOGIN","code":"`+wrong+`"}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.EqualValues(t, 4, body["error"].(map[string]any)["attemptsLeft"])
	status, _, body = b.do(t, http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"LOGIN","code":"`+msg.Code+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, true, body["verified"])
	status, _, _ = b.do(t, http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"LOGIN","code":"`+msg.Code+`"}`)
	require.Equal(t, http.StatusNotFound, status, "a code is used once")
}

func TestEmailCodeRefusesHeaderInjectionAndPublishesNothing(t *testing.T) {
	b := setup(t, options{})
	for _, body := range []string{
		`{"email":"a@example.com\r\nBcc: x@evil.test","scene":"LOGIN"}`,
		`{"email":"a@example.com\nBcc: x@evil.test","scene":"LOGIN"}`,
		`{"email":"Ann <a@example.com>","scene":"LOGIN"}`,
		`{"email":"not-an-address","scene":"LOGIN"}`,
		`{"email":"a@example.com","scene":"SPAM"}`,
	} {
		status, _, got := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", body, got)
	}
	conn, _ := b.conn(t)
	d, _ := b.tp.Domain(topology.DomainEmail)
	require.Zero(t, storetest.QueueDepth(t, conn, d.Queue), "nothing was published")
}

func TestEmailCodeIPLimit(t *testing.T) {
	b := setup(t, options{})
	for _, a := range []string{"x1@example.com", "x2@example.com", "x3@example.com"} {
		status, _, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", `{"email":"`+a+`","scene":"REGISTER"}`)
		require.Equal(t, http.StatusAccepted, status, "%v", body)
	}
	status, headers, body := b.do(t, http.MethodPost, "/v1/auth/email-codes", "", `{"email":"x4@example.com","scene":"REGISTER"}`)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "ip", body["error"].(map[string]any)["limit"])
	require.NotEmpty(t, headers.Get("Retry-After"))
}
