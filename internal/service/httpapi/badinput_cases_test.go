package httpapi_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// The error codes the table expects (httpapi's Code* constants).
const (
	c400 = httpapi.CodeBadRequest
	c401 = httpapi.CodeUnauthorized
	c402 = httpapi.CodePaymentRequired
	c403 = httpapi.CodeForbidden
	c404 = httpapi.CodeNotFound
	c405 = httpapi.CodeMethodNotAllowed
	c409 = httpapi.CodeConflict
	c413 = httpapi.CodeTooLarge
	c415 = httpapi.CodeUnsupportedMedia
)

// badRequests is the table, route by route in the order of routes.go.
func (f *badFixture) badRequests(t *testing.T) []badRequest {
	t.Helper()
	var all []badRequest
	for _, part := range [][]badRequest{
		f.badPlatform(t), f.badEmailCodes(t), f.badAgent(t), f.badObjects(t), f.badOrders(t),
		f.badAlipay(t), f.badWechat(t), f.badIdentity(t), f.badGames(t), f.badConsole(t),
	} {
		all = append(all, part...)
	}
	return all
}

// forged are tokens the API must refuse: each 401.
func (f *badFixture) forged(t *testing.T) map[string]string {
	t.Helper()
	sign := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		require.NoError(t, err)
		return s
	}
	exp := time.Now().Add(time.Hour).Unix()
	valid := jwt.MapClaims{"sub": "ann", "role": "user", "exp": exp}
	tampered := strings.Split(f.ann, ".")
	tampered[1] = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"root","role":"admin","exp":9999999999}`))
	return map[string]string{
		"expired token":            sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "ann", "role": "user", "exp": time.Now().Add(-time.Hour).Unix()}),
		"token signed by another":  sign(jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), valid),
		"alg none token":           sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid),
		"tampered payload":         strings.Join(tampered, "."),
		"HS512 token":              sign(jwt.SigningMethodHS512, secret, valid),
		"token without expiry":     sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "ann", "role": "user"}),
		"token with unknown role":  sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "ann", "role": "root", "exp": exp}),
		"token with 65-byte sub":   sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": strings.Repeat("a", 65), "role": "user", "exp": exp}),
		"token not yet valid":      sign(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "ann", "role": "user", "exp": exp, "nbf": exp - 60}),
		"garbage token":            "not.a.token",
		"token with a header only": "eyJhbGciOiJIUzI1NiJ9",
	}
}

func (f *badFixture) badPlatform(t *testing.T) []badRequest {
	t.Helper()

	out := []badRequest{
		{name: "unknown route", req: f.jsonReq(t, http.MethodGet, "/v1/nope", f.ann, ""), status: 404, code: c404},
		{name: "POST to healthz", req: f.jsonReq(t, http.MethodPost, "/healthz", "", `{}`), status: 405, code: c405},
		{name: "DELETE readyz", req: f.jsonReq(t, http.MethodDelete, "/readyz", "", ""), status: 405, code: c405},
		{name: "POST to metrics", req: f.jsonReq(t, http.MethodPost, "/metrics", "", `x`), status: 405, code: c405},
		{name: "metrics on the public address", req: f.jsonReq(t, http.MethodGet, "/metrics", "", ""), status: 404, code: c404},
		{name: "PUT openapi.json", req: f.jsonReq(t, http.MethodPut, "/openapi.json", "", `{}`), status: 405, code: c405},
		{name: "me: no token", req: f.jsonReq(t, http.MethodGet, "/v1/me", "", ""), status: 401, code: c401},
		{name: "me: Basic scheme", req: f.jsonReq(t, http.MethodGet, "/v1/me", "", "", "Authorization", "Basic YW5uOnB3"), status: 401, code: c401},
		{name: "me: POST", req: f.jsonReq(t, http.MethodPost, "/v1/me", f.ann, `{}`), status: 405, code: c405},
	}
	forged := f.forged(t)
	for _, name := range slices.Sorted(maps.Keys(forged)) {
		out = append(out, badRequest{name: "me: " + name, req: f.jsonReq(t, http.MethodGet, "/v1/me", forged[name], ""), status: 401, code: c401})
	}
	return out
}

func (f *badFixture) badEmailCodes(t *testing.T) []badRequest {
	t.Helper()

	const send, verify = "/v1/auth/email-codes", "/v1/auth/email-codes/verify"
	issued := f.b.takeCode(t).Code // ann@example.com, LOGIN, issued by the fixture
	wrong := "000000"
	if issued == wrong {
		wrong = "000001"
	}
	req := func(path, body string) *http.Request { return f.jsonReq(t, http.MethodPost, path, "", body) }
	return []badRequest{
		{name: "malformed JSON", req: req(send, `{"email":`), status: 400, code: c400},
		{name: "email of the wrong type", req: req(send, `{"email":42,"scene":"LOGIN"}`), status: 400, code: c400},
		{name: "missing scene", req: req(send, `{"email":"ann@example.com"}`), status: 400, code: c400},
		{name: "unknown scene", req: req(send, `{"email":"ann@example.com","scene":"ADMIN"}`), status: 400, code: c400},
		{name: "header injection", req: req(send, `{"email":"ann@example.com\r\nBcc: all@example.com","scene":"LOGIN"}`), status: 400, code: c400},
		{name: "LF in the address", req: req(send, `{"email":"ann@example.com\nX: y","scene":"REGISTER"}`), status: 400, code: c400},
		{name: "display name", req: req(send, `{"email":"Ann <ann@example.com>","scene":"LOGIN"}`), status: 400, code: c400},
		{name: "300-byte address", req: req(send, `{"email":"`+strings.Repeat("a", 288)+`@example.com","scene":"LOGIN"}`), status: 400, code: c400},
		{name: "array body", req: req(send, `[{"email":"ann@example.com","scene":"LOGIN"}]`), status: 400, code: c400},
		{name: "text/plain body", req: f.request(t, http.MethodPost, send, "", strings.NewReader(`{"email":"ann@example.com","scene":"LOGIN"}`),
			"Content-Type", "text/plain"), status: 415, code: c415},
		{name: "oversized body", req: req(send, `{"email":"ann@example.com","scene":"LOGIN","pad":"`+strings.Repeat("x", 5<<10)+`"}`),
			status: 413, code: c413},
		{name: "trailing data", req: req(send, `{"email":"ann@example.com","scene":"LOGIN"} {"scene":"REGISTER"}`), status: 400, code: c400},
		{name: "empty body", req: f.jsonReq(t, http.MethodPost, send, "", ""), status: 400, code: c400},
		{name: "GET email-codes", req: f.jsonReq(t, http.MethodGet, send, "", ""), status: 405, code: c405},
		{name: "verify: code with letters", req: req(verify, `{"email":"ann@example.com","scene":"LOGIN","code":"12ab56"}`), status: 400, code: c400},
		{name: "verify: code as a number", req: req(verify, `{"email":"ann@example.com","scene":"LOGIN","code":123456}`), status: 400, code: c400},
		{name: "verify: 5 digits", req: req(verify, `{"email":"ann@example.com","scene":"LOGIN","code":"12345"}`), status: 400, code: c400},
		{name: "verify: no code issued", req: req(verify, `{"email":"bob@example.com","scene":"LOGIN","code":"123456"}`), status: 404, code: c404},
		{name: "verify: another scene's code", req: req(verify, `{"email":"ann@example.com","scene":"REGISTER","code":"`+issued+`"}`), status: 404, code: c404},
		// A wrong code counts an attempt (verify:attempts may move): 5 lock the code.
		{name: "verify: wrong code", req: req(verify, `{"email":"ann@example.com","scene":"LOGIN","code":"`+wrong+`"}`), status: 400, code: c400},
		{name: "verify: injection in the address", req: req(verify, `{"email":"ann@example.com\r\n","scene":"LOGIN","code":"`+issued+`"}`), status: 400, code: c400},
	}
}

func (f *badFixture) badAgent(t *testing.T) []badRequest {
	t.Helper()

	const usage, balance = "/v1/agent/usage", "/v1/agent/balance"
	req := func(body string) *http.Request { return f.jsonReq(t, http.MethodPost, usage, f.svc, body) }
	return []badRequest{
		{name: "usage: user token", req: f.jsonReq(t, http.MethodPost, usage, f.ann, `{"requestId":"u1","username":"ann","modelName":"m","inputTokens":1}`),
			status: 403, code: c403},
		{name: "usage: no token", req: f.jsonReq(t, http.MethodPost, usage, "", `{"requestId":"u1","username":"ann","modelName":"m"}`), status: 401, code: c401},
		{name: "usage: negative tokens", req: req(`{"requestId":"u1","username":"ann","modelName":"m","inputTokens":-1}`), status: 400, code: c400},
		{name: "usage: tokens past int32", req: req(`{"requestId":"u1","username":"ann","modelName":"m","outputTokens":2147483648}`), status: 400, code: c400},
		{name: "usage: tokens past int64", req: req(`{"requestId":"u1","username":"ann","modelName":"m","inputTokens":9223372036854775808}`), status: 400, code: c400},
		{name: "usage: tokens as a string", req: req(`{"requestId":"u1","username":"ann","modelName":"m","inputTokens":"5"}`), status: 400, code: c400},
		{name: "usage: fractional tokens", req: req(`{"requestId":"u1","username":"ann","modelName":"m","inputTokens":1.5}`), status: 400, code: c400},
		{name: "usage: missing requestId", req: req(`{"username":"ann","modelName":"m","inputTokens":1}`), status: 400, code: c400},
		{name: "usage: requestId with a space", req: req(`{"requestId":"u 1","username":"ann","modelName":"m","inputTokens":1}`), status: 400, code: c400},
		{name: "usage: 65-byte username", req: req(`{"requestId":"u1","username":"` + strings.Repeat("a", 65) + `","modelName":"m","inputTokens":1}`),
			status: 400, code: c400},
		{name: "usage: unknown model", req: req(`{"requestId":"u1","username":"ann","modelName":"nope","inputTokens":1}`), status: 400, code: c400},
		{name: "usage: unknown user", req: req(`{"requestId":"u1","username":"ghost","modelName":"m","inputTokens":1}`), status: 404, code: c404},
		{name: "usage: replayed id, another body", req: req(`{"requestId":"r1","username":"ann","modelName":"m","inputTokens":4}`), status: 409, code: c409},
		{name: "usage: requestId naming a foreign message's key", req: req(`{"requestId":"msg:x","username":"ann","modelName":"m","inputTokens":1}`), status: 400, code: c400},
		{name: "usage: requestId in the hashed keys' namespace", req: req(`{"requestId":"sha256:x","username":"ann","modelName":"m","inputTokens":1}`), status: 400, code: c400},
		{name: "usage: replayed id, a body that costs nothing", req: req(`{"requestId":"r1","username":"ann","modelName":"m"}`), status: 409, code: c409},
		{name: "usage: cost past int64 micro-fen", req: req(`{"requestId":"u1","username":"ann","modelName":"huge","inputTokens":2147483647,"outputTokens":2147483647}`),
			status: 400, code: c400},
		{name: "usage: empty balance", req: req(`{"requestId":"z2","username":"zed","modelName":"m","inputTokens":1}`), status: 402, code: c402},
		{name: "usage: oversized body", req: req(`{"requestId":"u1","username":"ann","modelName":"m","pad":"` + strings.Repeat("x", 17<<10) + `"}`),
			status: 413, code: c413},
		{name: "usage: malformed JSON", req: req(`{"requestId":"u1",`), status: 400, code: c400},
		{name: "usage: GET", req: f.jsonReq(t, http.MethodGet, usage, f.svc, ""), status: 405, code: c405},
		{name: "batch: user token", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.ann, `{"items":[{"requestId":"u1","username":"ann","modelName":"m","inputTokens":1}]}`),
			status: 403, code: c403},
		{name: "batch: no token", req: f.jsonReq(t, http.MethodPost, usage+"/batch", "", `{"items":[]}`), status: 401, code: c401},
		{name: "batch: no items", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.svc, `{}`), status: 400, code: c400},
		{name: "batch: items not an array", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.svc, `{"items":{"requestId":"u1"}}`), status: 400, code: c400},
		{name: "batch: malformed JSON", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.svc, `{"items":[{"requestId":"u1",`), status: 400, code: c400},
		{name: "batch: more items than the limit", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.svc,
			`{"items":[`+strings.TrimSuffix(strings.Repeat(`{"requestId":"u1","username":"ann","modelName":"m","inputTokens":1},`, 101), ",")+`]}`), status: 413, code: c413},
		{name: "batch: oversized body", req: f.jsonReq(t, http.MethodPost, usage+"/batch", f.svc, `{"items":[],"pad":"`+strings.Repeat("x", 102<<10)+`"}`),
			status: 413, code: c413},
		{name: "batch: GET", req: f.jsonReq(t, http.MethodGet, usage+"/batch", f.svc, ""), status: 405, code: c405},
		{name: "balance: service token", req: f.jsonReq(t, http.MethodGet, balance, f.svc, ""), status: 403, code: c403},
		{name: "balance: forged token", req: f.jsonReq(t, http.MethodGet, balance, f.forged(t)["token signed by another"], ""), status: 401, code: c401},
		{name: "balance: POST", req: f.jsonReq(t, http.MethodPost, balance, f.ann, `{"balanceFen":"1000"}`), status: 405, code: c405},
	}
}

func (f *badFixture) badObjects(t *testing.T) []badRequest {
	t.Helper()

	n := 0
	// upload sends a file; each goes as a user of its own: the upload
	// limits (5 wallpapers an hour per user) are not what is tested here.
	upload := func(query string, body []byte, isChunked bool, headers ...string) *http.Request {
		n++
		tok := f.b.token(t, "uploader"+strconv.Itoa(n), httpapi.RoleUser)
		var r io.Reader = bytes.NewReader(body)
		if isChunked {
			r = chunked(body)
		}
		return f.request(t, http.MethodPost, "/v1/objects?"+query, tok, r, append([]string{"Content-Type", "image/png"}, headers...)...)
	}
	page := []byte("<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>")
	get := func(id, token string) *http.Request {
		return f.jsonReq(t, http.MethodGet, "/v1/objects/"+id, token, "")
	}
	return []badRequest{
		{name: "upload: unknown kind", req: upload("kind=folder", []byte("x"), false), status: 400, code: c400},
		{name: "upload: no kind", req: upload("name=x.png", []byte("x"), false), status: 400, code: c400},
		{name: "upload: name with a slash", req: upload("kind=wallpaper&name=a%2Fb", []byte("x"), false), status: 400, code: c400},
		{name: "upload: name ..", req: upload("kind=wallpaper&name=..", []byte("x"), false), status: 400, code: c400},
		{name: "upload: name with NUL", req: upload("kind=wallpaper&name=a%00b", []byte("x"), false), status: 400, code: c400},
		{name: "upload: name not UTF-8", req: upload("kind=wallpaper&name=%ff", []byte("x"), false), status: 400, code: c400},
		{name: "upload: name too long", req: upload("kind=wallpaper&name="+strings.Repeat("n", 250), []byte("x"), false), status: 400, code: c400},
		{name: "upload: empty body", req: upload("kind=wallpaper", nil, false), status: 400, code: c400},
		{name: "upload: oversized, declared", req: upload("kind=wallpaper", images.SamplePNG(2000, 1), false), status: 413, code: c413},
		{name: "upload: oversized, chunked", req: upload("kind=wallpaper", images.SamplePNG(5000, 2), true), status: 413, code: c413},
		{name: "upload: oversized avatar", req: upload("kind=avatar", images.SamplePNG(1025, 3), false), status: 413, code: c413},
		{name: "upload: bad Content-Type", req: upload("kind=wallpaper", []byte("x"), false, "Content-Type", "image/png; ="), status: 400, code: c400},
		// Only images of the kind's types, by their bytes (doc/objects.md).
		{name: "upload: a page as a wallpaper", req: upload("kind=wallpaper&name=x.html", page, false, "Content-Type", "text/html"), status: 415, code: c415},
		{name: "upload: a page said to be a PNG", req: upload("kind=wallpaper&name=x.png", page, false), status: 415, code: c415},
		{name: "upload: a page, chunked", req: upload("kind=avatar", page, true, "Content-Type", "application/octet-stream"), status: 415, code: c415},
		{name: "upload: an SVG avatar", req: upload("kind=avatar&name=a.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`), false,
			"Content-Type", "image/svg+xml"), status: 415, code: c415},
		{name: "upload: a PNG said to be text", req: upload("kind=avatar", images.SamplePNG(100, 4), false, "Content-Type", "text/plain"), status: 415, code: c415},
		{name: "upload: a PNG named .html", req: upload("kind=avatar&name=x.html", images.SamplePNG(100, 5), false), status: 400, code: c400},
		{name: "upload: a GIF wallpaper", req: upload("kind=wallpaper&name=w.gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), false,
			"Content-Type", "image/gif"), status: 415, code: c415},
		{name: "upload: text that is no image", req: upload("kind=avatar&name=me.png", []byte("not really a png"), false), status: 415, code: c415},
		{name: "upload: the store's temp prefix", req: upload("kind=wallpaper&name=.objstore-tmp-1.png", images.SamplePNG(100, 6), false), status: 400, code: c400},
		{name: "upload: admin token", req: f.request(t, http.MethodPost, "/v1/objects?kind=wallpaper", f.admin, strings.NewReader("x")), status: 403, code: c403},
		{name: "upload: no token", req: f.request(t, http.MethodPost, "/v1/objects?kind=wallpaper", "", strings.NewReader("x")), status: 401, code: c401},
		{name: "get: id not a number", req: get("abc", f.ann), status: 404, code: c404},
		{name: "get: another user's object", req: get(f.bobObject, f.ann), status: 404, code: c404},
		{name: "get: id past uint64", req: get("18446744073709551616", f.ann), status: 404, code: c404},
		{name: "get: negative id", req: get("-1", f.ann), status: 404, code: c404},
		{name: "get: service token", req: get(f.bobObject, f.svc), status: 403, code: c403},
		{name: "get: DELETE", req: f.jsonReq(t, http.MethodDelete, "/v1/objects/"+f.bobObject, f.bob, ""), status: 405, code: c405},
		{name: "content: id not a number", req: get("abc/content", f.ann), status: 404, code: c404},
		{name: "content: another user's object", req: get(f.bobObject+"/content", f.ann), status: 404, code: c404},
		{name: "content: no such object", req: get("999999/content", f.bob), status: 404, code: c404},
		{name: "content: no token", req: get(f.bobObject+"/content", ""), status: 401, code: c401},
		{name: "content: service token", req: get(f.bobObject+"/content", f.svc), status: 403, code: c403},
		{name: "content: PUT", req: f.request(t, http.MethodPut, "/v1/objects/"+f.bobObject+"/content", f.bob, bytes.NewReader(images.SamplePNG(100, 7)),
			"Content-Type", "image/png"), status: 405, code: c405},
	}
}

func (f *badFixture) badOrders(t *testing.T) []badRequest {
	t.Helper()

	const orders = "/v1/payments/orders"
	req := func(body string) *http.Request { return f.jsonReq(t, http.MethodPost, orders, f.bob, body) }
	get := func(no, token string) *http.Request { return f.jsonReq(t, http.MethodGet, orders+"/"+no, token, "") }
	return []badRequest{
		{name: "order: unknown product", req: req(`{"product":"gold","amountFen":100,"channel":"ALIPAY"}`), status: 400, code: c400},
		{name: "order: amount as a string", req: req(`{"product":"agent-recharge","amountFen":"100","channel":"ALIPAY"}`), status: 400, code: c400},
		{name: "order: fractional amount", req: req(`{"product":"agent-recharge","amountFen":1.5,"channel":"ALIPAY"}`), status: 400, code: c400},
		{name: "order: negative amount", req: req(`{"product":"agent-recharge","amountFen":-100,"channel":"ALIPAY"}`), status: 400, code: c400},
		{name: "order: amount past the limit", req: req(fmt.Sprintf(`{"product":"agent-recharge","amountFen":%d,"channel":"ALIPAY"}`, order.RechargeMaxFen+1)),
			status: 400, code: c400},
		{name: "order: unknown channel", req: req(`{"product":"agent-recharge","amountFen":100,"channel":"PAYPAL"}`), status: 400, code: c400},
		{name: "order: channel in lower case", req: req(`{"product":"agent-recharge","amountFen":100,"channel":"alipay"}`), status: 400, code: c400},
		{name: "order: receipt address injection", req: req(`{"product":"agent-recharge","amountFen":100,"channel":"ALIPAY","receiptEmail":"bob@example.com\r\nBcc: x@example.com"}`),
			status: 400, code: c400},
		{name: "order: wrong pro-month price", req: req(`{"product":"pro-month","amountFen":1,"channel":"WECHAT"}`), status: 400, code: c400},
		{name: "order: a second while one is pending", req: f.jsonReq(t, http.MethodPost, orders, f.ann, `{"product":"pro-month","amountFen":1500,"channel":"ALIPAY"}`),
			status: 409, code: c409},
		{name: "order: service token", req: f.jsonReq(t, http.MethodPost, orders, f.svc, `{"product":"pro-month","amountFen":1500,"channel":"ALIPAY"}`),
			status: 403, code: c403},
		{name: "order: malformed JSON", req: req(`{"product":"pro-month"`), status: 400, code: c400},
		{name: "order: oversized body", req: req(`{"product":"pro-month","pad":"` + strings.Repeat("x", 5<<10) + `"}`), status: 413, code: c413},
		{name: "get order: another user's", req: get(f.wendyOrder.OutTradeNo, f.ann), status: 404, code: c404},
		{name: "get order: unknown", req: get("20260101000000deadbeefdeadbeefdead", f.ann), status: 404, code: c404},
		{name: "get order: path traversal", req: get("..%2F..%2Fme", f.ann), status: 404, code: c404},
		{name: "get order: service token", req: get(f.annOrder.OutTradeNo, f.svc), status: 403, code: c403},
	}
}

// alipay is a callback with form, signed with key (unsigned when nil),
// then changed by after.
func (f *badFixture) alipay(t *testing.T, form url.Values, key *rsa.PrivateKey, after func(url.Values)) *http.Request {
	t.Helper()
	if key != nil {
		sig, err := paynotify.SignAlipay(form, key)
		require.NoError(t, err)
		form.Set("sign_type", "RSA2")
		form.Set("sign", sig)
	}
	if after != nil {
		after(form)
	}
	return f.request(t, http.MethodPost, "/v1/payments/notify/alipay", "", strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
}

func (f *badFixture) badAlipay(t *testing.T) []badRequest {
	t.Helper()

	ours := payKeys(t).keys.AlipayPrivate
	paid := func() url.Values { return alipayNotice(f.annOrder, "TRADE_SUCCESS", "50.00") }
	with := func(k, v string) url.Values { form := paid(); form.Set(k, v); return form }
	fail := func(name string, req *http.Request) badRequest {
		return badRequest{name: "alipay: " + name, req: req, status: 400, text: "fail"}
	}
	return []badRequest{
		fail("signed by another key", f.alipay(t, paid(), f.other.AlipayPrivate, nil)),
		fail("amount tampered after signing", f.alipay(t, paid(), ours, func(v url.Values) { v.Set("total_amount", "0.01") })),
		fail("order tampered after signing", f.alipay(t, paid(), ours, func(v url.Values) { v.Set("out_trade_no", f.wendyOrder.OutTradeNo) })),
		fail("wrong app id", f.alipay(t, with("app_id", "2021999999999999"), ours, nil)),
		fail("amount differs from the order", f.alipay(t, with("total_amount", "49.99"), ours, nil)),
		fail("sign_type RSA", f.alipay(t, paid(), ours, func(v url.Values) { v.Set("sign_type", "RSA") })),
		fail("repeated parameter", f.alipay(t, paid(), ours, func(v url.Values) { v.Add("total_amount", "50.00") })),
		fail("unknown order", f.alipay(t, with("out_trade_no", "20260101000000deadbeefdeadbeefdead"), ours, nil)),
		fail("another channel's order", f.alipay(t, with("out_trade_no", f.wendyOrder.OutTradeNo), ours, nil)),
		fail("no signature", f.alipay(t, paid(), nil, nil)),
		fail("signature not base64", f.alipay(t, paid(), ours, func(v url.Values) { v.Set("sign", "%%%") })),
		fail("amount with three places", f.alipay(t, with("total_amount", "50.001"), ours, nil)),
		fail("bad notify_time", f.alipay(t, with("notify_time", "yesterday"), ours, nil)),
		fail("JSON instead of a form", f.request(t, http.MethodPost, "/v1/payments/notify/alipay", "", strings.NewReader(`{"out_trade_no":"x"}`),
			"Content-Type", "application/json")),
		{name: "alipay: oversized body", req: f.request(t, http.MethodPost, "/v1/payments/notify/alipay", "",
			strings.NewReader("a="+strings.Repeat("x", paynotify.MaxBodyBytes)), "Content-Type", "application/x-www-form-urlencoded"),
			status: 413, code: c413},
		{name: "alipay: GET", req: f.request(t, http.MethodGet, "/v1/payments/notify/alipay?"+paid().Encode(), "", nil), status: 405, code: c405},
	}
}

// wechatTx is the transaction WeChat Pay would send for o, paid.
func wechatTx(o store.PaymentOrder) map[string]any {
	return map[string]any{"appid": "wx1", "mchid": testWechatMch, "out_trade_no": o.OutTradeNo,
		"transaction_id": "4200000001" + o.OutTradeNo[:6], "trade_state": "SUCCESS", "success_time": "2026-11-30T20:01:02+08:00",
		"amount": map[string]any{"total": o.AmountFen, "payer_total": o.AmountFen, "currency": "CNY", "payer_currency": "CNY"}}
}

// wechatEvent is a notification carrying tx, sealed with key.
func wechatEvent(t *testing.T, tx map[string]any, key string) []byte {
	t.Helper()
	plain, err := json.Marshal(tx)
	require.NoError(t, err)
	nonce := paynotify.NewWechatNonce(12)
	ct, err := paynotify.EncryptWechatResource(plain, key, nonce, "transaction")
	require.NoError(t, err)
	return []byte(`{"id":"EV-` + paynotify.NewWechatNonce(8) + `","create_time":"2026-11-30T20:01:05+08:00","resource_type":"encrypt-resource",` +
		`"event_type":"TRANSACTION.SUCCESS","summary":"ok","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM",` +
		`"ciphertext":"` + ct + `","associated_data":"transaction","nonce":"` + nonce + `"}}`)
}

// wechat is a callback of body signed at `at` by the platform key, its
// signature changed by sig when set, sent as from serial; send is the body
// the request carries (body when nil).
func (f *badFixture) wechat(t *testing.T, body []byte, at time.Time, sig func(string) string, serial string, send []byte) *http.Request {
	t.Helper()
	stamp := strconv.FormatInt(at.Unix(), 10)
	nonce := paynotify.NewWechatNonce(32)
	s, err := paynotify.SignWechat(body, stamp, nonce, payKeys(t).keys.WechatPrivate)
	require.NoError(t, err)
	if sig != nil {
		s = sig(s)
	}
	if send == nil {
		send = body
	}
	req := f.request(t, http.MethodPost, "/v1/payments/notify/wechat", "", bytes.NewReader(send))
	req.Header = paynotify.WechatHeader(stamp, nonce, s, serial)
	req.Header.Set("Content-Type", "application/json")
	return req
}

func (f *badFixture) badWechat(t *testing.T) []badRequest {
	t.Helper()

	k := payKeys(t).keys
	good := wechatEvent(t, wechatTx(f.wendyOrder), k.APIv3Key)
	tx := func(change func(map[string]any)) []byte {
		m := wechatTx(f.wendyOrder)
		change(m)
		return wechatEvent(t, m, k.APIv3Key)
	}
	var reserialised bytes.Buffer
	require.NoError(t, json.Indent(&reserialised, good, "", " "))
	now := time.Now()
	refused := func(name string, status int, req *http.Request) badRequest {
		return badRequest{name: "wechat: " + name, req: req, status: status, code: "FAIL"}
	}
	noHeaders := f.request(t, http.MethodPost, "/v1/payments/notify/wechat", "", bytes.NewReader(good), "Content-Type", "application/json")
	return []badRequest{
		refused("bad signature", 401, f.wechat(t, good, now, func(s string) string { return corruptSignature(t, s) }, k.WechatSerial, nil)),
		refused("signed by another key", 401, func() *http.Request {
			stamp := strconv.FormatInt(now.Unix(), 10)
			s, err := paynotify.SignWechat(good, stamp, "n", f.other.WechatPrivate)
			require.NoError(t, err)
			req := f.request(t, http.MethodPost, "/v1/payments/notify/wechat", "", bytes.NewReader(good))
			req.Header = paynotify.WechatHeader(stamp, "n", s, k.WechatSerial)
			return req
		}()),
		refused("replayed 6 minutes later", 401, f.wechat(t, good, sinceNow(-6*time.Minute), nil, k.WechatSerial, nil)),
		refused("timestamp 6 minutes ahead", 401, f.wechat(t, good, sinceNow(6*time.Minute), nil, k.WechatSerial, nil)),
		refused("unknown serial", 401, f.wechat(t, good, now, nil, "0123ABCD", nil)),
		refused("probe signature", 401, f.wechat(t, good, now, func(string) string { return "WECHATPAY/SIGNTEST/abc" }, k.WechatSerial, nil)),
		refused("body re-serialised after signing", 401, f.wechat(t, good, now, nil, k.WechatSerial, reserialised.Bytes())),
		refused("body changed after signing", 401, f.wechat(t, good, now, nil, k.WechatSerial, bytes.Replace(good, []byte(`"ok"`), []byte(`"OK"`), 1))),
		refused("sealed with another API v3 key", 500, f.wechat(t, wechatEvent(t, wechatTx(f.wendyOrder), f.other.APIv3Key), now, nil, k.WechatSerial, nil)),
		refused("no Wechatpay headers", 400, noHeaders),
		refused("timestamp not a number", 400, func() *http.Request {
			r := f.wechat(t, good, now, nil, k.WechatSerial, nil)
			r.Header.Set("Wechatpay-Timestamp", "soon")
			return r
		}()),
		// doc/payments.md says 500 for these three; the handler answers 400
		// (both make WeChat resend): noted in the report, left as it is.
		refused("amount differs from the order", 400, f.wechat(t, tx(func(m map[string]any) {
			m["amount"] = map[string]any{"total": 2999, "payer_total": 2999, "currency": "CNY", "payer_currency": "CNY"}
		}), now, nil, k.WechatSerial, nil)),
		refused("another merchant", 400, f.wechat(t, tx(func(m map[string]any) { m["mchid"] = "1999999999" }), now, nil, k.WechatSerial, nil)),
		refused("paid without a transaction id", 400, f.wechat(t, tx(func(m map[string]any) { delete(m, "transaction_id") }), now, nil, k.WechatSerial, nil)),
		refused("unknown order", 400, f.wechat(t, tx(func(m map[string]any) { m["out_trade_no"] = "20260101000000deadbeefdeadbeefdead" }), now, nil, k.WechatSerial, nil)),
		refused("another channel's order", 400, f.wechat(t, tx(func(m map[string]any) { m["out_trade_no"] = f.annOrder.OutTradeNo }), now, nil, k.WechatSerial, nil)),
		refused("signed malformed JSON", 400, f.wechat(t, []byte(`{"id":"x","resource":`), now, nil, k.WechatSerial, nil)),
		{name: "wechat: oversized body", req: f.request(t, http.MethodPost, "/v1/payments/notify/wechat", "",
			bytes.NewReader(append(append([]byte(`{"id":"x","pad":"`), bytes.Repeat([]byte("a"), paynotify.MaxBodyBytes)...), `"}`...)),
			"Content-Type", "application/json"), status: 413, code: c413},
		{name: "wechat: GET", req: f.request(t, http.MethodGet, "/v1/payments/notify/wechat", "", nil), status: 405, code: c405},
	}
}

func (f *badFixture) badIdentity(t *testing.T) []badRequest {
	t.Helper()

	path := func(certifyID string) string { return "/v1/identity/verifications/" + certifyID + "/result" }
	req := func(certifyID, body string) *http.Request {
		return f.jsonReq(t, http.MethodPost, path(certifyID), f.svc, body)
	}
	return []badRequest{
		{name: "identity: certifyId with a space", req: req("cert%20x", `{"username":"amy","status":"FAILED"}`), status: 400, code: c400},
		{name: "identity: 129-byte certifyId", req: req(strings.Repeat("c", 129), `{"username":"amy","status":"FAILED"}`), status: 400, code: c400},
		{name: "identity: unknown status", req: req("cert-9", `{"username":"amy","status":"MAYBE"}`), status: 400, code: c400},
		{name: "identity: status as a number", req: req("cert-9", `{"username":"amy","status":1}`), status: 400, code: c400},
		{name: "identity: pass without material", req: req("cert-9", `{"username":"amy","status":"PASSED"}`), status: 400, code: c400},
		{name: "identity: empty username", req: req("cert-9", `{"username":"","status":"FAILED"}`), status: 400, code: c400},
		{name: "identity: user token", req: f.jsonReq(t, http.MethodPost, path("cert-9"), f.ann, `{"username":"ann","status":"PASSED","materialInfo":"x"}`),
			status: 403, code: c403},
		{name: "identity: another user's certification", req: req("cert-1", `{"username":"bob","status":"PASSED","materialInfo":"x"}`), status: 409, code: c409},
		// The same pass again (the provider's callback resent): answered, and
		// no second row or message.
		{name: "identity: replayed pass", req: req("cert-1", `{"username":"ivy","status":"PASSED","materialInfo":"{\"enc\":1}"}`), status: 200},
		{name: "identity: failure after the pass", req: req("cert-1", `{"username":"ivy","status":"FAILED"}`), status: 200},
		{name: "identity: oversized body", req: req("cert-9", `{"username":"amy","status":"PASSED","materialInfo":"`+strings.Repeat("x", 300<<10)+`"}`),
			status: 413, code: c413},
		{name: "identity: malformed JSON", req: req("cert-9", `{"username":"amy",`), status: 400, code: c400},
		{name: "identity status: service token", req: f.jsonReq(t, http.MethodGet, "/v1/identity/status", f.svc, ""), status: 403, code: c403},
		{name: "identity status: POST", req: f.jsonReq(t, http.MethodPost, "/v1/identity/status", f.ann, `{"verified":true}`), status: 405, code: c405},
	}
}

func (f *badFixture) badGames(t *testing.T) []badRequest {
	t.Helper()

	score := func(body string) *http.Request {
		return f.jsonReq(t, http.MethodPost, "/v1/games/2048/scores", f.ann, body)
	}
	run := func(fields string) string {
		return `{"submitId":"s-new","sessionId":"` + f.session + `",` + fields + `}`
	}
	bad := func(name, field string, req *http.Request) badRequest {
		return badRequest{name: "score: " + name, req: req, status: 400, code: c400, reason: field}
	}
	board := func(query string) *http.Request {
		return f.jsonReq(t, http.MethodGet, "/v1/games/2048/leaderboard"+query, f.ann, "")
	}
	nobody := f.b.token(t, "nobody", httpapi.RoleUser)
	return []badRequest{
		{name: "session: unknown game", req: f.jsonReq(t, http.MethodPost, "/v1/games/chess/sessions", f.ann, ""), status: 400, code: c400, reason: "unknown_game"},
		{name: "session: no account", req: f.jsonReq(t, http.MethodPost, "/v1/games/2048/sessions", nobody, ""), status: 404, code: c404, reason: "no_account"},
		{name: "session: admin token", req: f.jsonReq(t, http.MethodPost, "/v1/games/2048/sessions", f.admin, ""), status: 403, code: c403},
		bad("fractional score", "invalid_field", score(run(`"score":1.5,"durationMs":1000,"moves":2`))),
		bad("score as a string", "invalid_field", score(run(`"score":"7","durationMs":1000,"moves":2`))),
		bad("score past int64", "invalid_field", score(run(`"score":9223372036854775808,"durationMs":1000,"moves":2`))),
		bad("score in exponent form", "invalid_field", score(run(`"score":1e3,"durationMs":1000,"moves":2`))),
		bad("negative duration", "invalid_field", score(run(`"score":4,"durationMs":-1,"moves":2`))),
		bad("moves past int32", "invalid_field", score(run(`"score":4,"durationMs":1000,"moves":2147483648`))),
		bad("missing score", "invalid_field", score(run(`"durationMs":1000,"moves":2`))),
		bad("null score", "invalid_field", score(run(`"score":null,"durationMs":1000,"moves":2`))),
		bad("submitId with a space", "invalid_field", score(`{"submitId":"s 1","sessionId":"`+f.session+`","score":4,"durationMs":1000,"moves":2}`)),
		bad("65-byte submitId", "invalid_field", score(`{"submitId":"`+strings.Repeat("s", 65)+`","sessionId":"`+f.session+`","score":4,"durationMs":1000,"moves":2}`)),
		bad("65-character clientVersion", "invalid_field", score(run(`"score":4,"durationMs":1000,"moves":2,"clientVersion":"`+strings.Repeat("v", 65)+`"`))),
		bad("clientVersion with a newline", "invalid_field", score(run(`"score":4,"durationMs":1000,"moves":2,"clientVersion":"1.0\n"`))),
		bad("unknown session", "bad_session", score(`{"submitId":"s-new","sessionId":"nosuchsession","score":4,"durationMs":1000,"moves":2}`)),
		bad("implausible run", "implausible_run", score(run(`"score":10000000,"durationMs":1000,"moves":2`))),
		bad("61 points a 2048 move", "implausible_run", score(run(`"score":122,"durationMs":1000,"moves":2`))),
		bad("51 2048 moves in a second", "implausible_run", score(run(`"score":4,"durationMs":1000,"moves":51`))),
		bad("a duration that wraps a time.Duration", "implausible_run", score(run(`"score":0,"durationMs":9223372036854775807,"moves":0`))),
		{name: "score: replayed submitId", req: score(`{"submitId":"s-dup","sessionId":"` + f.session + `","score":8,"durationMs":1500,"moves":3}`),
			status: 409, code: c409},
		{name: "score: a second run on a used session", req: score(run(`"score":8,"durationMs":1500,"moves":3`)),
			status: 409, code: c409, reason: "session_used"},
		{name: "score: oversized body", req: score(run(`"score":4,"durationMs":1000,"moves":2,"pad":"` + strings.Repeat("x", 5<<10) + `"`)),
			status: 413, code: c413},
		{name: "score: unknown game", req: f.jsonReq(t, http.MethodPost, "/v1/games/chess/scores", f.ann, run(`"score":4,"durationMs":1000,"moves":2`)),
			status: 400, code: c400, reason: "unknown_game"},
		{name: "score: malformed JSON", req: score(`{"submitId":"s-new",`), status: 400, code: c400},
		{name: "score: no token", req: f.jsonReq(t, http.MethodPost, "/v1/games/2048/scores", "", run(`"score":4,"durationMs":1000,"moves":2`)),
			status: 401, code: c401},
		{name: "leaderboard: limit 0", req: board("?limit=0"), status: 400, code: c400, reason: "invalid_field"},
		{name: "leaderboard: limit not a number", req: board("?limit=abc"), status: 400, code: c400, reason: "invalid_field"},
		{name: "leaderboard: limit past 200", req: board("?limit=201"), status: 400, code: c400, reason: "invalid_field"},
		{name: "leaderboard: unknown game", req: f.jsonReq(t, http.MethodGet, "/v1/games/chess/leaderboard", f.ann, ""), status: 400, code: c400,
			reason: "unknown_game"},
		{name: "leaderboard: service token", req: f.jsonReq(t, http.MethodGet, "/v1/games/2048/leaderboard", f.svc, ""), status: 403, code: c403},
	}
}

// badConsole is the operator console's routes (admin.go): its pages and
// actions to anyone but an admin, and the wrong methods of its login and
// logout.
func (f *badFixture) badConsole(t *testing.T) []badRequest {
	t.Helper()

	forged := f.forged(t)["token signed by another"]
	return []badRequest{
		{name: "console: DELETE login", req: f.jsonReq(t, http.MethodDelete, "/admin/login", "", ""), status: 405, code: c405},
		{name: "console: PUT logout", req: f.jsonReq(t, http.MethodPut, "/admin/logout", "", ""), status: 405, code: c405},
		{name: "console: page without a token", req: f.jsonReq(t, http.MethodGet, "/admin/dead", "", ""), status: 401, code: c401},
		{name: "console: page with a user token", req: f.jsonReq(t, http.MethodGet, "/admin/dead", f.ann, ""), status: 403, code: c403},
		{name: "console: replay with a user token", req: f.jsonReq(t, http.MethodPost, "/admin/dead/replay", f.ann, `{}`), status: 403, code: c403},
		{name: "console: replay with a forged token", req: f.jsonReq(t, http.MethodPost, "/admin/dead/replay", forged, `{}`), status: 401, code: c401},
		{name: "console: run a job with a service token", req: f.jsonReq(t, http.MethodPost, "/admin/jobs/balance-sync/run", f.svc, `{}`), status: 403, code: c403},
		{name: "console: outbox replay with a user token", req: f.jsonReq(t, http.MethodPost, "/admin/outbox/replay", f.ann, `table=outbox&all=1`), status: 403, code: c403},
		{name: "console: overview without a token", req: f.jsonReq(t, http.MethodGet, "/admin/", "", ""), status: 401, code: c401},
		{name: "console: a dead message with a service token", req: f.jsonReq(t, http.MethodGet, "/admin/dead/email/1", f.svc, ""), status: 403, code: c403},
		{name: "console: money with a forged token", req: f.jsonReq(t, http.MethodGet, "/admin/money?user=ann", forged, ""), status: 401, code: c401},
		{name: "console: outbox with a user token", req: f.jsonReq(t, http.MethodGet, "/admin/outbox", f.ann, ""), status: 403, code: c403},
		{name: "console: jobs without a token", req: f.jsonReq(t, http.MethodGet, "/admin/jobs", "", ""), status: 401, code: c401},
		{name: "console: stylesheet with a user token", req: f.jsonReq(t, http.MethodGet, "/admin/static/console.css", f.ann, ""), status: 403, code: c403},
		{name: "console: a page it does not have", req: f.jsonReq(t, http.MethodGet, "/admin/nope", f.admin, ""), status: 404, code: c404},
		{name: "console: GET of an action", req: f.jsonReq(t, http.MethodGet, "/admin/dead/replay", f.admin, ""), status: 405, code: c405},
	}
}
