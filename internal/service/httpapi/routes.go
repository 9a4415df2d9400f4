package httpapi

import (
	"net/http"

	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/internal/kit/paynotify"
)

// agentUsageMaxBody bounds a charge's body: one small JSON record.
const agentUsageMaxBody = 16 << 10

// routes is every endpoint the API serves: who may call it, its limits and
// body limit, and its handler, which lives in its domain's file. An
// endpoint is one line here and its entry in openapi.yaml;
// TestOpenAPIListsExactlyTheRoutesServed fails when the two differ.
func (s *Server) routes() []Route {
	return []Route{
		// The platform's own.
		{Method: http.MethodGet, Path: "/healthz", Handle: s.healthz},
		{Method: http.MethodGet, Path: "/readyz", Handle: s.ready},
		{Method: http.MethodGet, Path: "/metrics", Handle: s.serveMetrics()},
		{Method: http.MethodGet, Path: "/openapi.json", Handle: s.openAPI},
		{Method: http.MethodGet, Path: "/v1/me", Roles: Roles, Handle: s.me},

		// Email verification codes (emailcodes.go).
		{Method: http.MethodPost, Path: "/v1/auth/email-codes", MaxBody: emailCodeMaxBody, Handle: s.sendEmailCode},
		{Method: http.MethodPost, Path: "/v1/auth/email-codes/verify", MaxBody: emailCodeMaxBody, Handle: s.verifyEmailCode},

		// Agent billing (agent.go).
		{Method: http.MethodPost, Path: "/v1/agent/usage", Roles: []Role{RoleService}, MaxBody: agentUsageMaxBody, Handle: s.agentUsage},
		{Method: http.MethodPost, Path: "/v1/agent/usage/batch", Roles: []Role{RoleService}, MaxBody: usageBatchMaxBody(s.usageBatchMax()),
			Handle: s.agentUsageBatch},
		{Method: http.MethodGet, Path: "/v1/agent/balance", Roles: []Role{RoleUser}, Handle: s.agentBalance},

		// Objects (objects.go).
		{Method: http.MethodPost, Path: "/v1/objects", Roles: []Role{RoleUser}, Limits: s.uploadLimits(),
			MaxBody: objstore.MaxSizeDefault, Handle: s.uploadObject},
		{Method: http.MethodGet, Path: "/v1/objects/{id}", Roles: []Role{RoleUser, RoleAdmin}, Handle: s.getObject},
		{Method: http.MethodGet, Path: "/v1/objects/{id}/content", Roles: []Role{RoleUser, RoleAdmin}, Handle: s.objectContent},

		// Payment orders (payments.go).
		{Method: http.MethodPost, Path: "/v1/payments/orders", Roles: []Role{RoleUser}, MaxBody: orderMaxBody, Handle: s.createOrder},
		{Method: http.MethodGet, Path: "/v1/payments/orders/{outTradeNo}", Roles: []Role{RoleUser, RoleAdmin}, Handle: s.getOrder},

		// Gateway callbacks (paynotify.go): no token; the signature is the proof.
		{Method: http.MethodPost, Path: "/v1/payments/notify/alipay", MaxBody: paynotify.MaxBodyBytes, Handle: s.alipayNotify},
		{Method: http.MethodPost, Path: "/v1/payments/notify/wechat", MaxBody: paynotify.MaxBodyBytes, Handle: s.wechatNotify},

		// Identity verification (identity.go).
		{Method: http.MethodPost, Path: "/v1/identity/verifications/{certifyId}/result", Roles: []Role{RoleService},
			MaxBody: identityResultMaxBody, Handle: s.identityResult},
		{Method: http.MethodGet, Path: "/v1/identity/status", Roles: []Role{RoleUser}, Handle: s.identityStatus},

		// The mini game (games.go, scores.go). The limits need the account
		// id, so the handlers apply them once they have it.
		{Method: http.MethodPost, Path: "/v1/games/{gameId}/sessions", Roles: []Role{RoleUser}, MaxBody: gameMaxBody, Handle: s.startSession},
		{Method: http.MethodPost, Path: "/v1/games/{gameId}/scores", Roles: []Role{RoleUser}, MaxBody: gameMaxBody, Handle: s.submitScore},
		{Method: http.MethodGet, Path: "/v1/games/{gameId}/leaderboard", Roles: []Role{RoleUser}, Handle: s.leaderboard},

		// The operator console (admin.go, internal/service/console): HTML pages and
		// POST forms, the token from a bearer header or the login's cookie.
		// Each page and action of console.Routes is a route of its own.
		{Method: http.MethodGet, Path: "/admin/login", Handle: s.adminLoginForm},
		{Method: http.MethodPost, Path: "/admin/login", MaxBody: 16 << 10, Handle: s.adminLogin},
		{Method: http.MethodPost, Path: "/admin/logout", Handle: s.adminLogout},
		s.consolePage("/admin/"),
		s.consolePage("/admin/dead"),
		s.consolePage("/admin/dead/{domain}/{id}"),
		s.consoleAction("/admin/dead/replay"),
		s.consolePage("/admin/money"),
		s.consolePage("/admin/outbox"),
		s.consoleAction("/admin/outbox/replay"),
		s.consolePage("/admin/jobs"),
		s.consoleAction("/admin/jobs/{name}/run"),
		s.consolePage("/admin/static/console.css"),
	}
}
