package topology

// AgentBillingDeduct is AgentBillingDeductMessage (domain "agent-billing"): a
// deduction already taken from the Redis balance, to apply to MySQL once.
// DeductionID is Isle's addition (SPEC 2): the API request id.
type AgentBillingDeduct struct {
	DeductionID  string `json:"deductionId"`
	Username     string `json:"username"`
	AmountFen    string `json:"amountFen"` // decimal string, 8 places
	ModelName    string `json:"modelName"`
	InputTokens  int32  `json:"inputTokens"`
	OutputTokens int32  `json:"outputTokens"`
	LastError    string `json:"lastError"`
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
