package httpapi

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
)

// Billing is what the agent endpoints need of internal/service/billing's Service:
// pricing and charging a model call, and reading a user's balance.
type Billing interface {
	Charge(ctx context.Context, r billing.Request) (billing.Charge, error)
	ChargeAll(ctx context.Context, rs []billing.Request) []billing.Result
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
	ch, err := s.backends.Billing.Charge(r.Context(), req.charge())
	if err != nil {
		return chargeRefusal(req, ch, err)
	}
	usage := usageMessage(req, ch)
	ledger := LedgerQueued
	if !ch.Deducted.IsPositive() {
		// Nothing was charged: a failure is the client's to retry.
		if err := s.Publish(r, usage, messaging.Options{MessageID: req.usageMessageID()}); err != nil {
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
		s.deferCharges(r, []deferred{{req, ch, usage}}, err)
	}
	return JSON(w, http.StatusOK, answerCharge(req, ch, ledger))
}

// charge is the billing request of req.
func (req usageRequest) charge() billing.Request {
	return billing.Request{ID: req.RequestID, Username: req.Username, Model: req.ModelName,
		Tokens: billing.Tokens{Input: req.InputTokens, Cached: req.CachedTokens, Output: req.OutputTokens, Reasoning: req.ReasoningTokens}}
}

// The message ids of a charge's usage and deduction: each keyed by the
// request, so a replay's messages are the first's.
func (req usageRequest) usageMessageID() string { return "usage:" + req.Username + ":" + req.RequestID }
func (req usageRequest) deductMessageID() string {
	return "deduct:" + req.Username + ":" + req.RequestID
}

// chargeRefusal is the answer to req when billing refused its charge with
// err (ch: what it knew of the charge).
func chargeRefusal(req usageRequest, ch billing.Charge, err error) error {
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
	default:
		return Unavailable("charge", err)
	}
}

// usageMessage is the usage message of req's charge ch.
func usageMessage(req usageRequest, ch billing.Charge) topology.AgentUsageStats {
	return topology.AgentUsageStats{
		RequestID: store.UsageRequestID(req.Username, req.RequestID), ModelName: req.ModelName, InputTokens: int32(req.InputTokens),
		CachedTokens: int32(req.CachedTokens), OutputTokens: int32(req.OutputTokens), ReasoningTokens: int32(req.ReasoningTokens),
		CostMicroFen: ch.CostMicroFen,
	}
}

// answerCharge is the answer to req's charge ch, whose deduction is on its
// way to the ledger as ledger says.
func answerCharge(req usageRequest, ch billing.Charge, ledger string) chargeAnswer {
	return chargeAnswer{
		RequestID:    req.RequestID,
		CostFen:      ch.Cost.StringFixed(store.MoneyScale),
		CostMicroFen: ch.CostMicroFen,
		DeductedFen:  ch.Deducted.StringFixed(store.MoneyScale),
		BalanceFen:   ch.Balance.StringFixed(store.MoneyScale),
		Replayed:     ch.Replayed,
		Ledger:       ledger,
	}
}

// Where a charge's deduction is on its way to the ledger.
const (
	LedgerQueued   = "queued"   // its messages are with the broker; a worker writes it
	LedgerDeferred = "deferred" // the broker could not take them; balance-sync writes it
)

// publishCharge publishes a charge's usage and its deduction, both before
// either confirm is awaited, and fails unless both are confirmed: then the
// caller writes both to the outbox (deferCharges), so a usage whose publish
// failed is not left to the pending record, which applying the deduction
// removes.
func (s *Server) publishCharge(r *http.Request, req usageRequest, ch billing.Charge, usage topology.AgentUsageStats) error {
	return errors.Join(s.publishAll(r, []messaging.Publication{
		{Msg: usage, Options: messaging.Options{MessageID: req.usageMessageID()}},
		{Msg: deductMessage(req, ch), Options: messaging.Options{MessageID: req.deductMessageID()}},
	})...)
}

func deductMessage(req usageRequest, ch billing.Charge) topology.AgentBillingDeduct {
	return topology.AgentBillingDeduct{
		DeductionID: req.RequestID, Username: req.Username, AmountFen: ch.Deducted.StringFixed(store.MoneyScale),
		ModelName: req.ModelName, InputTokens: int32(req.InputTokens), OutputTokens: int32(req.OutputTokens),
		PendingRef: ch.Ref, RequestHash: ch.RequestHash,
	}
}

// deferred is a charge whose messages the broker did not take.
type deferred struct {
	req   usageRequest
	ch    billing.Charge
	usage topology.AgentUsageStats
}

// deferCharges writes the usage and deduction messages of charges the
// broker did not take (err) to the outbox, in one transaction, for the relay
// to publish; when MySQL cannot take them either, each charge's pending
// record in Redis is all there is, which balance-sync applies.
func (s *Server) deferCharges(r *http.Request, ds []deferred, err error) {
	oerr := s.outboxCharges(r, ds)
	for _, d := range ds {
		if oerr != nil {
			s.backends.Log.ErrorContext(r.Context(), "charge recorded in Redis only: its messages could not be published nor written to the outbox; balance-sync will apply it",
				"user", d.req.Username, "deduction", d.req.RequestID, "err", err, "outbox_err", oerr)
		} else {
			s.backends.Log.WarnContext(r.Context(), "charge recorded; its messages could not be published and wait in the outbox for the relay",
				"user", d.req.Username, "deduction", d.req.RequestID, "err", err)
		}
	}
}

// outboxCharges writes each charge's usage and deduction to the outbox in
// one transaction, usage first, for the relay to publish. Each is keyed by
// the request, so writing them again adds nothing; their consumers apply
// each once whichever way it comes (by request id, and by deduction id in
// the ledger), also when a publish that seemed to fail had arrived.
func (s *Server) outboxCharges(r *http.Request, ds []deferred) error {
	usageDom, ok1 := s.backends.Topology.Domain(topology.DomainAgentUsageStats)
	deductDom, ok2 := s.backends.Topology.Domain(topology.DomainAgentBilling)
	if !ok1 || !ok2 {
		return errors.New("the topology has no agent billing domains")
	}
	trace := correlation.RequestID(r.Context())
	entries := make([]store.OutboxEntry, 0, 2*len(ds))
	for _, d := range ds {
		entries = append(entries,
			store.OutboxEntry{Domain: usageDom, Msg: d.usage, Key: d.req.usageMessageID(), TraceID: trace},
			store.OutboxEntry{Domain: deductDom, Msg: deductMessage(d.req, d.ch), Key: d.req.deductMessageID(), TraceID: trace})
	}
	return store.Enqueue(r.Context(), s.backends.DB, entries)
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
	bal, err := s.backends.Billing.Balance(r.Context(), p.Subject)
	switch {
	case errors.Is(err, billing.ErrUnknownUser):
		return Errorf(http.StatusNotFound, CodeNotFound, "no account for %s", p.Subject)
	case err != nil:
		return Unavailable("balance", err)
	}
	pending, err := s.backends.Billing.Pending(r.Context(), p.Subject)
	if err != nil {
		return Unavailable("balance", err)
	}
	return JSON(w, http.StatusOK, balanceAnswer{
		Username: p.Subject, BalanceFen: bal.StringFixed(store.MoneyScale), PendingFen: pending.StringFixed(store.MoneyScale),
	})
}
