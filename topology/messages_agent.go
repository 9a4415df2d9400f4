package topology

import "github.com/shopspring/decimal"

// AgentBillingDeduct is AgentBillingDeductMessage (domain "agent-billing"): a
// deduction already taken from the Redis balance, to apply to MySQL once.
// DeductionID, PendingRef and RequestHash are Isle's additions (doc/messaging.md, "Dead messages"): the
// API request id, the nonce of the hot-balance charge, and the hash of the
// request's body; a Spring producer sends none of them.
type AgentBillingDeduct struct {
	DeductionID  string `json:"deductionId"`
	Username     string `json:"username"`
	AmountFen    string `json:"amountFen"` // decimal string, 8 places
	ModelName    string `json:"modelName"`
	InputTokens  int32  `json:"inputTokens"`
	OutputTokens int32  `json:"outputTokens"`
	LastError    string `json:"lastError"`
	PendingRef   string `json:"pendingRef"`
	RequestHash  string `json:"requestHash"`
}

// AgentUsageStats is AgentUsageStatsMessage (domain "agent-usage-stats"):
// per-request usage deltas, fire-and-forget. RequestID is Isle's addition so
// that a redelivered message is not counted twice.
type AgentUsageStats struct {
	RequestID       string `json:"requestId"`
	ModelName       string `json:"modelName"`
	InputTokens     int32  `json:"inputTokens"`
	CachedTokens    int32  `json:"cachedTokens"`
	OutputTokens    int32  `json:"outputTokens"`
	ReasoningTokens int32  `json:"reasoningTokens"`
	CostMicroFen    int64  `json:"costMicroFen"` // 1 micro-fen = 0.00000001 fen
}

// Record is the Java record name.
func (AgentBillingDeduct) Record() string { return "AgentBillingDeductMessage" }

// Domain is the domain AgentBillingDeduct travels on.
func (AgentBillingDeduct) Domain() string { return DomainAgentBilling }

// Validate requires the user, an amount > 0 that fits DECIMAL(20,8), the
// model and token counts >= 0. DeductionID may be empty: the consumer
// derives one.
func (m AgentBillingDeduct) Validate() error {
	_, amount := parseAmount("amountFen", m.AmountFen)
	return firstError(
		maxBytes("deductionId", m.DeductionID, 128),
		refText("pendingRef", m.PendingRef),
		refText("requestHash", m.RequestHash),
		required("username", m.Username),
		maxBytes("username", m.Username, 64),
		amount,
		required("modelName", m.ModelName),
		maxBytes("modelName", m.ModelName, 128),
		nonNegative("inputTokens", int64(m.InputTokens)),
		nonNegative("outputTokens", int64(m.OutputTokens)),
	)
}

// Amount is AmountFen as an exact decimal, never a float; the error is
// Validate's for the field.
func (m AgentBillingDeduct) Amount() (decimal.Decimal, error) {
	return parseAmount("amountFen", m.AmountFen)
}

// Record is the Java record name.
func (AgentUsageStats) Record() string { return "AgentUsageStatsMessage" }

// Domain is the domain AgentUsageStats travels on.
func (AgentUsageStats) Domain() string { return DomainAgentUsageStats }

// Validate requires the model and counts and cost >= 0.
func (m AgentUsageStats) Validate() error {
	return firstError(
		maxBytes("requestId", m.RequestID, 255),
		required("modelName", m.ModelName),
		maxBytes("modelName", m.ModelName, 128),
		nonNegative("inputTokens", int64(m.InputTokens)),
		nonNegative("cachedTokens", int64(m.CachedTokens)),
		nonNegative("outputTokens", int64(m.OutputTokens)),
		nonNegative("reasoningTokens", int64(m.ReasoningTokens)),
		nonNegative("costMicroFen", m.CostMicroFen),
	)
}
