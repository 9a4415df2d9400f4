package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// codeScenes are the scenes a code can be asked for (doc/mail.md).
var codeScenes = []string{"REGISTER", "LOGIN", "RESET_PASSWORD", "CHANGE_EMAIL", "UNREGISTER"}

// emailCodeMaxBody bounds the email code endpoints' bodies.
const emailCodeMaxBody = 4 << 10

type emailCodeRequest struct {
	Email string `json:"email"`
	Scene string `json:"scene"`
	Code  string `json:"code"`
}

func (s *Server) readEmailCode(r *http.Request) (emailCodeRequest, error) {
	var req emailCodeRequest
	if err := DecodeJSON(r, &req); err != nil {
		return req, err
	}
	if err := mail.ValidAddress(req.Email); err != nil {
		return req, BadRequest("email: %v", err)
	}
	if !slices.Contains(codeScenes, req.Scene) {
		return req, BadRequest("scene: one of REGISTER, LOGIN, RESET_PASSWORD, CHANGE_EMAIL, UNREGISTER")
	}
	return req, nil
}

// sendEmailCode issues a code for the address and scene and publishes its
// dispatch message; the worker mails it. Answered 202 once the broker has
// the message. Limits: 60 s between codes per scene and address, 3 an hour
// per client (its IP, an IPv6 one's /64: LimitAddress), 3 an hour and 30 a
// day per address (429 with Retry-After).
func (s *Server) sendEmailCode(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readEmailCode(r)
	if err != nil {
		return err
	}
	codes := store.NewEmailCodes(s.backends.Redis, s.cfg.CodePepper)
	code, err := codes.Issue(r.Context(), req.Scene, req.Email, s.limitAddress(r))
	var lim *store.ErrCodeLimited
	switch {
	case errors.As(err, &lim):
		s.metrics.limited.WithLabelValues("email-code-" + lim.Limit).Inc()
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: max(lim.RetryAfter, time.Second),
			Message: "too many codes (" + lim.Limit + " limit); try again later", Details: map[string]any{"limit": lim.Limit}}
	case err != nil:
		return Unavailable("email codes", err)
	}
	msg := topology.EmailCodeDispatch{TraceID: correlation.RequestID(r.Context()), Email: req.Email, Scene: req.Scene, Code: code,
		CreatedAtEpochSeconds: s.now().Unix()}
	if err := s.Publish(r, msg, messaging.Options{}); err != nil {
		// Nobody will receive this code: let the caller ask again at once
		// (the hourly and daily counts keep it, erring on the safe side).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Second)
		defer cancel()
		if cerr := codes.Cancel(ctx, req.Scene, req.Email); cerr != nil {
			s.backends.Log.WarnContext(r.Context(), "an unsent email code could not be withdrawn", "err", cerr)
		}
		return err
	}
	return JSON(w, http.StatusAccepted, map[string]any{"sent": true, "scene": req.Scene,
		"expiresInSeconds": int(keys.VerifyCodeTTL.Seconds()), "cooldownSeconds": int(keys.VerifyCooldownTTL.Seconds())})
}

// verifyEmailCode checks a code: 200 when it matches (it is then used up),
// 400 when it is wrong (with the attempts left), 404 when there is none or
// it expired, 429 after the fifth wrong code (ask for a new one).
func (s *Server) verifyEmailCode(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readEmailCode(r)
	if err != nil {
		return err
	}
	if len(req.Code) != 6 || !digitsOnly(req.Code) {
		return BadRequest("code: 6 digits")
	}
	left, err := store.NewEmailCodes(s.backends.Redis, s.cfg.CodePepper).Check(r.Context(), req.Scene, req.Email, req.Code)
	switch {
	case errors.Is(err, store.ErrCodeWrong):
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "wrong code",
			Details: map[string]any{"attemptsLeft": left}}
	case errors.Is(err, store.ErrCodeNone):
		return Errorf(http.StatusNotFound, CodeNotFound, "no code for this address and scene, or it expired")
	case errors.Is(err, store.ErrCodeLocked):
		return &Error{Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: keys.VerifyCooldownTTL,
			Message: "too many wrong codes: ask for a new one"}
	case err != nil:
		return Unavailable("email codes", err)
	}
	return JSON(w, http.StatusOK, map[string]any{"verified": true, "scene": req.Scene})
}

func digitsOnly(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
