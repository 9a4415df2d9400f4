package httpapi

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/eisland/isle/internal/billing"
	"github.com/eisland/isle/internal/correlation"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// Billing is what the agent endpoints need of internal/billing's Service:
// pricing and charging a model call, and reading a user's balance.
type Billing interface {
	Charge(ctx context.Context, r billing.Request) (billing.Charge, error)
	Balance(ctx context.Context, username string) (decimal.Decimal, error)
	Pending(ctx context.Context, username string) (decimal.Decimal, error)
}

var (
	requestIDField = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	nameField      = regexp.MustCompile(`^[A-Za-z0-9._@+-]{1,64}$`)
	modelField     = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,128}$`)
)

type usageRequest struct {
	RequestID       string `json:"requestId"`
	Username        string `json:"username"`
	ModelName       string `json:"modelName"`
	InputTokens     int64  `json:"inputTokens"`
	CachedTokens    int64  `json:"cachedTokens"`
	OutputTokens    int64  `json:"outputTokens"`
	ReasoningTokens int64  `json:"reasoningTokens"`
}

const maxTokens = 1<<31 - 1 // the messages carry Java ints

func (u usageRequest) validate() error {
	switch {
	case !requestIDField.MatchString(u.RequestID):
		return BadRequest("requestId: 1-128 of A-Z a-z 0-9 . _ : -")
	case store.IsForeignKey(u.RequestID):
		// The keys of messages without a deduction id (doc/money.md).
		return BadRequest("requestId: may not begin with %s", strings.Join(store.ForeignKeyPrefixes, " or "))
	case !nameField.MatchString(u.Username):
		return BadRequest("username: 1-64 of A-Z a-z 0-9 . _ @ + -")
	case !modelField.MatchString(u.ModelName):
		return BadRequest("modelName: 1-128 of A-Z a-z 0-9 . _ : / -")
	}
	// In field order, so a request with several bad counts always hears of
	// the same one.
	counts := []struct {
		name string
		n    int64
	}{
		{"inputTokens", u.InputTokens}, {"cachedTokens", u.CachedTokens},
		{"outputTokens", u.OutputTokens}, {"reasoningTokens", u.ReasoningTokens},
	}
	for _, c := range counts {
		if c.n < 0 || c.n > maxTokens {
			return BadRequest("%s: want 0..%d", c.name, int64(maxTokens))
		}
	}
	return nil
}

// agentUsage charges one model call to a user (doc/money.md): it prices the
// tokens, takes the cost from the hot balance (the request id deducts once),
// and publishes the usage and the deduction before it answers. A charge is
// answered 200 once the hot balance took it: "ledger" says whether its
// messages went out or balance-sync will write it (the broker could not
// take them); a 5xx means nothing was charged.
func (s *Server) agentUsage(w http.ResponseWriter, r *http.Request) error {
	var req usageRequest
	if err := DecodeJSON(r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	ch, err := s.deps.Billing.Charge(r.Context(), billing.Request{ID: req.RequestID, Username: req.Username, Model: req.ModelName,
		Tokens: billing.Tokens{Input: req.InputTokens, Cached: req.CachedTokens, Output: req.OutputTokens, Reasoning: req.ReasoningTokens}})
	switch {
	case errors.Is(err, billing.ErrNoBalance):
		return &Error{Status: http.StatusPaymentRequired, Code: CodePaymentRequired, Message: "the agent balance is zero",
			Details: map[string]any{"balanceFen": decimal.Zero.StringFixed(store.MoneyScale), "costFen": ch.Cost.StringFixed(store.MoneyScale)}}
	case errors.Is(err, billing.ErrUnknownModel):
		return BadRequest("modelName: no pricing for %q", req.ModelName)
	case errors.Is(err, billing.ErrCostTooLarge):
		return BadRequest("the tokens cost more at the price of %q than a charge can carry", req.ModelName)
	case errors.Is(err, billing.ErrUnknownUser):
		return Errorf(http.StatusNotFound, CodeNotFound, "no user %q", req.Username)
	case errors.Is(err, billing.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: CodeConflict,
			Message: "request id " + req.RequestID + " was charged for a request with another body; send a new id for a new request",
			Details: map[string]any{"requestId": req.RequestID, "deductedFen": ch.Deducted.StringFixed(store.MoneyScale)}}
	case errors.Is(err, billing.ErrOutcomeUnknown):
		// Not "nothing was charged": the script may have run (doc/money.md).
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfter: time.Second,
			Message: "Redis stopped answering while the charge ran, so it may have been taken: send the same requestId again to learn what was; it never charges twice",
			Details: map[string]any{"reason": ReasonOutcomeUnknown, "requestId": req.RequestID}}
	case err != nil:
		return Unavailable("charge", err)
	}
	usage := topology.AgentUsageStats{
		RequestID: req.Username + ":" + req.RequestID, ModelName: req.ModelName, InputTokens: int32(req.InputTokens),
		CachedTokens: int32(req.CachedTokens), OutputTokens: int32(req.OutputTokens), ReasoningTokens: int32(req.ReasoningTokens),
		CostMicroFen: ch.CostMicroFen,
	}
	ledger := LedgerQueued
	if !ch.Deducted.IsPositive() {
		// Nothing was charged: a failure is the client's to retry.
		if err := s.Publish(r, usage, messaging.Options{MessageID: "usage:" + req.Username + ":" + req.RequestID}); err != nil {
			return err
		}
	} else if err := s.publishCharge(r, req, ch, usage); err != nil {
		// The charge stands: the hot balance took it, and the answer says
		// so rather than claim a failure it did not have. Its messages go to
		// the outbox in MySQL, which the relay publishes when the broker is
		// back: Redis's pending record alone (which balance-sync applies
		// once it is older than BALANCE_SYNC_PENDING_AGE) would be lost with
		// Redis's data. When MySQL cannot take them either, that record is
		// all there is.
		ledger = LedgerDeferred
		if oerr := s.outboxCharge(r, req, ch, usage); oerr != nil {
			s.deps.Log.ErrorContext(r.Context(), "charge recorded in Redis only: its messages could not be published nor written to the outbox; balance-sync will apply it",
				"user", req.Username, "deduction", req.RequestID, "err", err, "outbox_err", oerr)
		} else {
			s.deps.Log.WarnContext(r.Context(), "charge recorded; its messages could not be published and wait in the outbox for the relay",
				"user", req.Username, "deduction", req.RequestID, "err", err)
		}
	}
	return JSON(w, http.StatusOK, chargeAnswer{
		RequestID:    req.RequestID,
		CostFen:      ch.Cost.StringFixed(store.MoneyScale),
		CostMicroFen: ch.CostMicroFen,
		DeductedFen:  ch.Deducted.StringFixed(store.MoneyScale),
		BalanceFen:   ch.Balance.StringFixed(store.MoneyScale),
		Replayed:     ch.Replayed,
		Ledger:       ledger,
	})
}

// Where a charge's deduction is on its way to the ledger.
const (
	LedgerQueued   = "queued"   // its messages are with the broker; a worker writes it
	LedgerDeferred = "deferred" // the broker could not take them; balance-sync writes it
)

// publishCharge publishes a charge's usage, then its deduction. The usage
// goes first: once the deduction is applied its pending record is gone,
// and with it the copy of the usage balance-sync would count.
func (s *Server) publishCharge(r *http.Request, req usageRequest, ch billing.Charge, usage topology.AgentUsageStats) error {
	if err := s.Publish(r, usage, messaging.Options{MessageID: "usage:" + req.Username + ":" + req.RequestID}); err != nil {
		return err
	}
	return s.Publish(r, deductMessage(req, ch), messaging.Options{MessageID: "deduct:" + req.Username + ":" + req.RequestID})
}

func deductMessage(req usageRequest, ch billing.Charge) topology.AgentBillingDeduct {
	return topology.AgentBillingDeduct{
		DeductionID: req.RequestID, Username: req.Username, AmountFen: ch.Deducted.StringFixed(store.MoneyScale),
		ModelName: req.ModelName, InputTokens: int32(req.InputTokens), OutputTokens: int32(req.OutputTokens),
		PendingRef: ch.Ref, RequestHash: ch.RequestHash,
	}
}

// outboxCharge writes a charge's usage and deduction to the outbox in one
// transaction, usage first, for the relay to publish. Each is keyed by the
// request, so writing them again adds nothing; their consumers apply each
// once whichever way it comes (by request id, and by deduction id in the
// ledger), also when a publish that seemed to fail had arrived.
func (s *Server) outboxCharge(r *http.Request, req usageRequest, ch billing.Charge, usage topology.AgentUsageStats) error {
	usageDom, ok1 := s.deps.Topology.Domain(topology.DomainAgentUsageStats)
	deductDom, ok2 := s.deps.Topology.Domain(topology.DomainAgentBilling)
	if !ok1 || !ok2 {
		return errors.New("the topology has no agent billing domains")
	}
	trace := correlation.RequestID(r.Context())
	key := req.Username + ":" + req.RequestID
	return s.deps.DB.WithContext(r.Context()).Transaction(func(tx *gorm.DB) error {
		if _, err := store.EnqueueMessage(tx, usageDom, usage, "usage:"+key, trace, 0); err != nil {
			return err
		}
		_, err := store.EnqueueMessage(tx, deductDom, deductMessage(req, ch), "deduct:"+key, trace, 0)
		return err
	})
}

type chargeAnswer struct {
	RequestID    string `json:"requestId"`
	CostFen      string `json:"costFen"`
	CostMicroFen int64  `json:"costMicroFen"`
	DeductedFen  string `json:"deductedFen"`
	BalanceFen   string `json:"balanceFen"`
	Replayed     bool   `json:"replayed"`
	Ledger       string `json:"ledger"`
}

type balanceAnswer struct {
	Username   string `json:"username"`
	BalanceFen string `json:"balanceFen"`
	PendingFen string `json:"pendingFen"`
}

// agentBalance answers the caller's hot balance and what of it is still on
// its way to MySQL.
func (s *Server) agentBalance(w http.ResponseWriter, r *http.Request) error {
	p, _ := PrincipalFrom(r.Context())
	bal, err := s.deps.Billing.Balance(r.Context(), p.Subject)
	switch {
	case errors.Is(err, billing.ErrUnknownUser):
		return Errorf(http.StatusNotFound, CodeNotFound, "no account for %s", p.Subject)
	case err != nil:
		return Unavailable("balance", err)
	}
	pending, err := s.deps.Billing.Pending(r.Context(), p.Subject)
	if err != nil {
		return Unavailable("balance", err)
	}
	return JSON(w, http.StatusOK, balanceAnswer{
		Username: p.Subject, BalanceFen: bal.StringFixed(store.MoneyScale), PendingFen: pending.StringFixed(store.MoneyScale),
	})
}
