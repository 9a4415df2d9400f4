package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Role is what a token's "role" claim grants.
type Role string

// The roles a bearer token can carry.
const (
	RoleUser    Role = "user"
	RoleService Role = "service"
	RoleAdmin   Role = "admin"
)

// Roles lists the valid roles.
var Roles = []Role{RoleUser, RoleService, RoleAdmin}

// roleList names the valid roles for error messages, e.g. "user, service, admin".
func roleList() string {
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// Principal is who a request's token says is calling.
type Principal struct {
	Subject string // the token's sub: a username, or a service's name
	Role    Role
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller of an authenticated route.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// claims are the token's claims: the registered ones and the role.
type claims struct {
	Role Role `json:"role"`
	jwt.RegisteredClaims
}

type authenticator struct {
	secret []byte
	parser *jwt.Parser
	leeway time.Duration
	now    func() time.Time

	mu    sync.Mutex
	valid map[string]verified // tokens verified before, until they expire
}

// verified is a token that passed parse, and until when it stays valid.
type verified struct {
	p     Principal
	until time.Time
}

// verifiedMax bounds the verified tokens kept; a full cache starts over.
const verifiedMax = 10_000

func newAuthenticator(secret []byte, leeway time.Duration, now func() time.Time) *authenticator {
	return &authenticator{secret: secret, leeway: leeway, now: now, valid: map[string]verified{}, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), // "none", RS256 and the rest are refused
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(now),
	)}
}

// check returns a bearer token's principal: from the tokens verified
// before while they have not expired (a service sends the same token with
// every request, and its signature and claims do not change), else parse's.
func (a *authenticator) check(token string) (Principal, error) {
	now := a.now()
	a.mu.Lock()
	v, ok := a.valid[token]
	a.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.p, nil
	}
	p, exp, err := a.parse(token)
	if err != nil {
		return p, err
	}
	a.mu.Lock()
	if len(a.valid) >= verifiedMax {
		clear(a.valid)
	}
	a.valid[token] = verified{p: p, until: exp.Add(a.leeway)}
	a.mu.Unlock()
	return p, nil
}

// parse checks a bearer token and returns its principal and expiry.
func (a *authenticator) parse(token string) (Principal, time.Time, error) {
	var c claims
	_, err := a.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, time.Time{}, errors.New("token expired")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return Principal{}, time.Time{}, errors.New("token signature is not valid")
	case err != nil:
		return Principal{}, time.Time{}, fmt.Errorf("token is not valid: %s", strings.TrimPrefix(err.Error(), "token has invalid claims: "))
	case c.Subject == "" || len(c.Subject) > 64:
		return Principal{}, time.Time{}, errors.New("token has no valid sub")
	case !slices.Contains(Roles, c.Role):
		return Principal{}, time.Time{}, fmt.Errorf("token role %q is not one of %s", c.Role, roleList())
	}
	return Principal{Subject: c.Subject, Role: c.Role}, c.ExpiresAt.Time, nil
}

// MintToken signs an HS256 token for sub with role, valid for ttl from now.
func MintToken(secret []byte, sub string, role Role, ttl time.Duration, now time.Time) (string, error) {
	if !slices.Contains(Roles, role) {
		return "", fmt.Errorf("role %q is not one of %s", role, roleList())
	}
	if sub == "" || ttl <= 0 {
		return "", errors.New("a token needs a subject and a positive ttl")
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}).SignedString(secret)
}

// banCheckTimeout bounds each step of the ban check, which fails open.
const banCheckTimeout = 250 * time.Millisecond

// authenticate checks the bearer token (401), the role (403) and the ban
// list (403). A ban check that cannot reach Redis lets the request through,
// logged and counted: a Redis outage must not lock every user out. While
// Redis's ban list is known to be behind MySQL's (it lost its data or came
// back from an older snapshot, until banWatch rebuilds it), MySQL answers.
func (s *Server) authenticate(r *http.Request, roles []Role) (Principal, error) {
	ctx := r.Context()
	token, ok := bearer(r)
	if !ok {
		return Principal{}, Errorf(http.StatusUnauthorized, CodeUnauthorized, "missing bearer token")
	}
	p, err := s.checkToken(ctx, token)
	if err != nil {
		return Principal{}, Errorf(http.StatusUnauthorized, CodeUnauthorized, "%v", err)
	}
	if !slices.Contains(roles, p.Role) {
		return Principal{}, Errorf(http.StatusForbidden, CodeForbidden, "role %s may not call this endpoint", p.Role)
	}
	banCtx, cancel := context.WithTimeout(ctx, banCheckTimeout)
	defer cancel()
	st, err := s.bans.bans.State(banCtx, p.Subject)
	if err != nil {
		s.metrics.banFailOpen.Inc()
		s.backends.Log.WarnContext(ctx, "ban check failed; letting the request through", "sub", p.Subject, "err", err)
		return p, nil
	}
	banned := st.Banned
	if s.bans.suspect(st.Generation) {
		banned = s.bans.bannedInMySQL(ctx, p.Subject, st.Banned)
	}
	if banned {
		return Principal{}, Errorf(http.StatusForbidden, CodeForbidden, "user %s is banned", p.Subject)
	}
	return p, nil
}
