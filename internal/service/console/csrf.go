package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
)

// CSRF: each browser gets a random nonce in an HttpOnly, SameSite=Strict
// cookie, and every form carries HMAC(CSRFKey, nonce, operator) in a hidden
// field. A POST is taken only when the field matches the cookie's nonce
// and the operator making it: another site can neither read the field nor
// compute it, and a cookie planted by a sibling domain is useless without
// the key. Requests whose Origin is another host are refused as well.
const (
	csrfCookie = "isle_console_csrf"
	csrfField  = "csrf"
)

// csrfToken returns the token the forms of r's page carry, setting the
// nonce cookie first when r has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	nonce := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		nonce = ck.Value
	} else {
		b := make([]byte, 24)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		nonce = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie, Value: nonce, Path: c.cfg.Prefix + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
	}
	return c.sign(nonce, c.backends.Operator(r))
}

func (c *Console) sign(nonce, operator string) string {
	m := hmac.New(sha256.New, c.backends.CSRFKey)
	m.Write([]byte(nonce))
	m.Write([]byte{0})
	m.Write([]byte(operator))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF refuses a POST whose token does not match its cookie and
// operator, or that comes from another origin. r's form must be parsed.
func (c *Console) checkCSRF(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			return errorf(http.StatusForbidden, "the form came from another site (%s); nothing was done", o)
		}
	}
	ck, err := r.Cookie(csrfCookie)
	got := r.PostForm.Get(csrfField)
	if err != nil || got == "" {
		return errorf(http.StatusForbidden, "the form carries no CSRF token or the browser sent no console cookie; reload the page and try again; nothing was done")
	}
	want := c.sign(ck.Value, c.backends.Operator(r))
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errorf(http.StatusForbidden, "the form's CSRF token is not this session's; reload the page and try again; nothing was done")
	}
	return nil
}
