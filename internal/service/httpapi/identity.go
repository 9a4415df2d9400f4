package httpapi

import (
	"errors"
	"net/http"
	"regexp"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/go-chi/chi/v5"
)

var certifyIDField = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// identityResultMaxBody bounds a verification result: the provider's
// encrypted material is a few kilobytes.
const identityResultMaxBody = 256 << 10

// identityResultLimit is the Spring backend's identity rate limit (doc/keys.md,
// identity:rate): 3 results per user in 5 minutes. The user is in the
// body, so the handler applies it once the body is read.
func identityResultLimit(username string) Limit {
	return Limit{Name: "identity-result", Kind: FixedWindow, Family: keys.IdentityRate, Max: 3, Per: keys.IdentityRateTTL,
		Key: func(*http.Request, Principal) ([]string, bool) { return []string{username}, true }}
}

type identityResultRequest struct {
	Username     string `json:"username"`
	Status       string `json:"status"` // PASSED or FAILED
	MaterialInfo string `json:"materialInfo"`
}

type identityAnswer struct {
	CertifyID      string `json:"certifyId"`
	Username       string `json:"username"`
	Status         string `json:"status"`
	MaterialQueued bool   `json:"materialQueued"` // the material's message is in the outbox (now or before)
}

// identityResult records what the identity provider answered for a
// certification (the service that asked it calls this). A pass and the
// message that stores its material are written in one transaction; the
// relay publishes the message and the identity-material consumer stores the
// material and sets the row's material_info_url.
func (s *Server) identityResult(w http.ResponseWriter, r *http.Request) error {
	certifyID := chi.URLParam(r, "certifyId")
	if !certifyIDField.MatchString(certifyID) {
		return BadRequest("certifyId: 1-128 of A-Z a-z 0-9 . _ : -")
	}
	var req identityResultRequest
	if err := DecodeJSON(r, &req); err != nil {
		return err
	}
	switch {
	case !nameField.MatchString(req.Username):
		return BadRequest("username: 1-64 of A-Z a-z 0-9 . _ @ + -")
	case req.Status != store.IdentityPassed && req.Status != store.IdentityFailed:
		return BadRequest("status: PASSED or FAILED")
	case req.Status == store.IdentityPassed && req.MaterialInfo == "":
		return BadRequest("materialInfo: required when status is PASSED")
	}
	if err := s.limit(r, identityResultLimit(req.Username)); err != nil {
		return err
	}
	if s.backends.Topology == nil {
		return Unavailable("identity", errors.New("no topology"))
	}
	d, _ := s.backends.Topology.Domain(topology.DomainIdentityMaterial)
	rec, err := store.NewIdentities(s.backends.DB, s.backends.Redis).Record(r.Context(), d, store.VerificationResult{
		Username: req.Username, CertifyID: certifyID, Passed: req.Status == store.IdentityPassed,
		MaterialInfo: req.MaterialInfo, TraceID: correlation.RequestID(r.Context()),
	})
	var fe *topology.FieldError
	switch {
	case errors.Is(err, store.ErrOtherUser):
		return Errorf(http.StatusConflict, CodeConflict, "certification %s belongs to another user", certifyID)
	case errors.As(err, &fe):
		return BadRequest("%v", fe)
	case err != nil && rec.Row.ID == 0:
		return Unavailable("identity", err)
	case err != nil: // recorded; only the status cache failed, and it expires
		s.backends.Log.WarnContext(r.Context(), "identity result recorded; its cached status was not updated", "err", err)
	}
	return JSON(w, http.StatusOK, identityAnswer{CertifyID: certifyID, Username: req.Username, Status: rec.Row.Status,
		MaterialQueued: rec.Row.Status == store.IdentityPassed && rec.Enqueued.MessageID != ""})
}

// identityStatus answers whether the caller has passed identity
// verification, from the hour-long cache of doc/keys.md or MySQL.
func (s *Server) identityStatus(w http.ResponseWriter, r *http.Request) error {
	p, _ := PrincipalFrom(r.Context())
	ok, err := store.NewIdentities(s.backends.DB, s.backends.Redis).Verified(r.Context(), p.Subject)
	if err != nil {
		return Unavailable("identity", err)
	}
	return JSON(w, http.StatusOK, map[string]any{"username": p.Subject, "verified": ok})
}
