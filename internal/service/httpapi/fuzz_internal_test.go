package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/topology"
)

// The API's decoders and its token verifier, fuzzed (doc/badinput.md):
// whatever arrives, they never panic, refuse with the error model's 400,
// 413 or 415 (401 for a token), and what they accept satisfies the checks
// the handlers and the consumers rely on.

// fuzzRequest is a POST carrying body as JSON, its body limited to limit.
func fuzzRequest(body []byte, limit int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, limit)
	return r
}

// refusal fails t unless err is how DecodeJSON refuses a body: a 400 or a
// 415 *Error, or the body limit's *http.MaxBytesError (a 413).
func refusal(t *testing.T, data []byte, err error) {
	t.Helper()
	var e *Error
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
	case errors.As(err, &e) && (e.Status == http.StatusBadRequest || e.Status == http.StatusUnsupportedMediaType) && e.Message != "":
	default:
		t.Fatalf("%q: refused with %v (%T), not the error model", data, err, err)
	}
}

var jsonSeeds = []string{
	`{"requestId":"r1","username":"ann","modelName":"m","inputTokens":3,"cachedTokens":0,"outputTokens":1,"reasoningTokens":0}`,
	`{"requestId":"r 1","username":"","modelName":"m","inputTokens":-1}`,
	`{"requestId":"r1","username":"ann","modelName":"m","inputTokens":2147483648}`,
	`{"requestId":"r1","username":"ann","modelName":"m","inputTokens":"5","outputTokens":1.5}`,
	`{"email":"ann@example.com","scene":"LOGIN","code":"123456"}`,
	`{"email":"ann@example.com\r\nBcc: x@y.z","scene":"REGISTER"}`,
	`{"email":"Ann <ann@example.com>","scene":"login"}`,
	`{"product":"pro-month","amountFen":1500,"channel":"ALIPAY","receiptEmail":"a@b.co"}`,
	`{"product":"agent-recharge","amountFen":"100","channel":"WECHAT"}`,
	`{"username":"ivy","status":"PASSED","materialInfo":"{\"enc\":1}"}`,
	`{"username":1,"status":null}`,
	`[]`, `null`, `{}`, `{"a":1} {"b":2}`, `{"a":`, "\xff", `{"email":"a@b.co","email":"c@d.co"}`,
	`{"Email":"a@b.co","SCENE":"LOGIN"}`, `{"amountFen":1e2}`, `{"pad":"` + strings.Repeat("x", 5000) + `"}`,
}

// Every request body the API decodes: DecodeJSON refuses with the error
// model or fills a value that encodes and decodes back to itself.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newValue := range []func() any{
			func() any { return new(usageRequest) },
			func() any { return new(emailCodeRequest) },
			func() any { return new(orderRequest) },
			func() any { return new(identityResultRequest) },
			func() any { return new(scoreRequest) },
		} {
			v := newValue()
			err := DecodeJSON(fuzzRequest(data, 4<<10), v)
			if err != nil {
				refusal(t, data, err)
				continue
			}
			if _, raw := v.(*scoreRequest); raw {
				continue // its numbers are kept raw: FuzzScoreRequest checks them
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%q: accepted %+v, which does not encode: %v", data, v, err)
			}
			again := newValue()
			if err := DecodeJSON(fuzzRequest(out, 1<<20), again); err != nil || !reflect.DeepEqual(v, again) {
				t.Fatalf("%q: accepted %+v, which decodes back as %+v (%v)", data, v, again, err)
			}
		}
	})
}

// A charge the API accepts is one the consumers accept: its usage and its
// deduction messages pass the contract's validation.
func FuzzUsageRequest(f *testing.F) {
	for _, s := range jsonSeeds[:4] {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"requestId":"` + strings.Repeat("r", 128) + `","username":"` + strings.Repeat("u", 64) + `","modelName":"a/b:c","reasoningTokens":2147483647}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req usageRequest
		if err := DecodeJSON(fuzzRequest(data, agentUsageMaxBody), &req); err != nil {
			refusal(t, data, err)
			return
		}
		if err := req.validate(); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("%q: %v is not a 400", data, err)
			}
			return
		}
		for _, n := range []int64{req.InputTokens, req.CachedTokens, req.OutputTokens, req.ReasoningTokens} {
			if n < 0 || n > maxTokens {
				t.Fatalf("%q: accepted a count of %d", data, n)
			}
		}
		usage := topology.AgentUsageStats{RequestID: req.Username + ":" + req.RequestID, ModelName: req.ModelName,
			InputTokens: int32(req.InputTokens), CachedTokens: int32(req.CachedTokens), OutputTokens: int32(req.OutputTokens),
			ReasoningTokens: int32(req.ReasoningTokens)}
		deduct := topology.AgentBillingDeduct{DeductionID: req.RequestID, Username: req.Username, AmountFen: "0.00000001",
			ModelName: req.ModelName, InputTokens: int32(req.InputTokens), OutputTokens: int32(req.OutputTokens)}
		for _, m := range []topology.Message{usage, deduct} {
			if err := m.Validate(); err != nil {
				t.Fatalf("%q: accepted, and its %s is refused: %v", data, m.Record(), err)
			}
		}
	})
}

// An email code request the API accepts names a bare address and a scene
// the consumer accepts: no header injection gets through to the mail.
func FuzzEmailCodeRequest(f *testing.F) {
	for _, s := range jsonSeeds[4:7] {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"email":"用户@例子.中国","scene":"UNREGISTER"}`))
	f.Add([]byte(`{"email":"a@b.co\u2028","scene":"LOGIN"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := (*Server)(nil).readEmailCode(fuzzRequest(data, emailCodeMaxBody))
		if err != nil {
			refusal(t, data, err)
			return
		}
		if err := mail.ValidAddress(req.Email); err != nil || strings.ContainsAny(req.Email, "\r\n") || !slices.Contains(codeScenes, req.Scene) {
			t.Fatalf("%q: accepted %+v (%v)", data, req, err)
		}
		m := topology.EmailCodeDispatch{Email: req.Email, Scene: req.Scene, Code: "123456", CreatedAtEpochSeconds: 1}
		if err := m.Validate(); err != nil {
			t.Fatalf("%q: accepted, and its message is refused: %v", data, err)
		}
	})
}

// No token is accepted unless it is HS256-signed with the secret, names a
// role and a subject, and has not expired: checked here independently of
// the JWT library.
func FuzzToken(f *testing.F) {
	secret := []byte("fuzz-secret-fuzz-secret-fuzz-sec")
	now := time.Unix(1_800_000_000, 0)
	for _, role := range Roles {
		tok, err := MintToken(secret, "ann", role, time.Hour, now)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
		// Its header swapped for alg none (the header is base64: a
		// replacement of "HS256" in the token would change nothing).
		_, rest, _ := strings.Cut(tok, ".")
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + rest)
	}
	expired, _ := MintToken(secret, "ann", RoleUser, time.Minute, now.Add(-time.Hour))
	f.Add(expired)
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbm4iLCJyb2xlIjoiYWRtaW4iLCJleHAiOjk5OTk5OTk5OTl9.")
	f.Add("not.a.token")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		a := newAuthenticator(secret, JWTLeewayDefault, func() time.Time { return now })
		p, exp, err := a.parse(token)
		if err != nil {
			if p != (Principal{}) {
				t.Fatalf("%q: refused (%v) with a principal %+v", token, err, p)
			}
			return
		}
		parts := strings.Split(token, ".")
		if len(parts) != 3 {
			t.Fatalf("%q: accepted with %d parts", token, len(parts))
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(parts[0] + "." + parts[1]))
		if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
			t.Fatalf("%q: accepted without the secret's HS256 signature", token)
		}
		if !slices.Contains(Roles, p.Role) || p.Subject == "" || len(p.Subject) > 64 || !exp.Add(JWTLeewayDefault).After(now) {
			t.Fatalf("%q: accepted %+v, expiring %s", token, p, exp)
		}
	})
}
