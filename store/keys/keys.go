package keys

import "time"

// TTLs and limits that callers apply (doc/keys.md).
const (
	VerifyCodeTTL      = 5 * time.Minute
	CodeMailSentTTL    = 2 * VerifyCodeTTL // past VerifyCodeTTL the consumer drops the message anyway
	CodeMailLockTTL    = 30 * time.Second
	VerifyCooldownTTL  = 60 * time.Second
	VerifyMaxAttempts  = 5
	VerifyRateIPTTL    = time.Hour
	VerifyRateHourTTL  = time.Hour
	IdentityRateTTL    = 300 * time.Second
	IdentityStatusTTL  = time.Hour
	ReplayNonceTTL     = 5 * time.Minute
	PaymentLockTTL     = 15 * time.Second
	PaymentNotifyTTL   = 30 * 24 * time.Hour
	PaymentChannelTTL  = 30 * 24 * time.Hour
	PricingCacheTTL    = 30 * time.Minute
	HighScoreTTL       = time.Hour
	UserMetaTTL        = time.Hour
	ScoreSubmitTTL     = 24 * time.Hour
	ScoreLockTTL       = 10 * time.Second
	ScoreRateWindow    = 60 * time.Second
	GameSessionTTL     = 6 * time.Hour
	LeaderboardSize    = 200
	BanBloomBits       = 1_000_003
	BanBloomHashes     = 6
	BanRebuildTTL      = 5 * time.Minute // a ban list being rebuilt, if its builder dies
	DeductionMarkerTTL = 7 * 24 * time.Hour
)

// The key families, by database as doc/keys.md lists them.
var (
	// DB 2 — email verification.
	VerifyCode          = family("verify:code:{scene}:{email}", DBVerify, VerifyCodeTTL, false)
	VerifyAttempts      = family("verify:attempts:{scene}:{email}", DBVerify, VerifyCodeTTL, false)
	VerifyCooldown      = family("verify:cooldown:{scene}:{email}", DBVerify, VerifyCooldownTTL, false)
	VerifyRateIP        = family("verify:rate:ip:{ip}", DBVerify, VerifyRateIPTTL, false)
	VerifyRateHour      = family("verify:rate:email:hour:{email}", DBVerify, VerifyRateHourTTL, false)
	VerifyRateDay       = family("verify:rate:email:day:{email}", DBVerify, 0, false)                // expires at the end of the UTC+8 day
	CodeMailSent        = family("verify:mail:sent:{dispatchKey}", DBVerify, CodeMailSentTTL, false) // Isle's own: the Spring backend has no such key
	CodeMailLock        = family("verify:mail:lock:{dispatchKey}", DBVerify, CodeMailLockTTL, false) // Isle's own: the Spring backend has no such key
	IdentityRate        = family("identity:rate:{username}", DBIdentity, IdentityRateTTL, false)
	IdentityVerified    = family("identity:verified:{username}", DBIdentity, IdentityStatusTTL, true)
	LoginFailures       = family("auth:limit:login:failures:{key}", DBAuthSecurity, 15*time.Minute, false)
	LoginLock           = family("auth:limit:login:lock:{key}", DBAuthSecurity, 10*time.Minute, false)
	RegisterAttempts    = family("auth:limit:register:attempts:{ip}", DBAuthSecurity, time.Hour, false)
	ReplayNonce         = family("auth:replay:{principal}:{method}:{uri}:{nonce}", DBAuthSecurity, ReplayNonceTTL, false)
	AvatarUploadIP      = family("upload:limit:user-avatar:ip:{ip}", DBUploadRate, time.Hour, false)
	AvatarUploadUser    = family("upload:limit:user-avatar:account:{account}", DBUploadRate, time.Hour, false)
	WallpaperUpload     = family("wallpaper:upload:{ownerUsername}", DBUploadRate, time.Hour, false)
	BanBloom            = family("user:ban:bloom", DBUserBan, 0, false)
	BanSet              = family("user:ban:set", DBUserBan, 0, false)
	BanGeneration       = family("user:ban:generation", DBUserBan, 0, false)                     // Isle's own: the Spring backend has no such key
	BanBloomRebuild     = family("user:ban:rebuild:bloom:{id}", DBUserBan, BanRebuildTTL, false) // Isle's own: the Spring backend has no such key
	BanSetRebuild       = family("user:ban:rebuild:set:{id}", DBUserBan, BanRebuildTTL, false)   // Isle's own: the Spring backend has no such key
	ProMonthPrice       = family("payment:pricing:pro-month:amount-fen", DBPayment, 0, false)
	OrderChannel        = family("payment:order:channel:{outTradeNo}", DBPayment, PaymentChannelTTL, false)
	OrderReceiptEmail   = family("payment:order:receipt-email:{outTradeNo}", DBPayment, 0, false) // order expiry + 60 min
	ActiveOrder         = family("payment:user:active-order:{username}", DBPayment, 0, false)     // order expiry + 5 min
	NotifyDone          = family("payment:notify:done:{channel}:{outTradeNo}:{transactionId}", DBPayment, PaymentNotifyTTL, false)
	OrderOpLock         = family("payment:order:op-lock:{outTradeNo}", DBPayment, PaymentLockTTL, false)
	OrderCreateLock     = family("payment:lock:create:{product}:{username}", DBPayment, PaymentLockTTL, false)
	AgentBalance        = family("agent:balance:{username}", DBAgentBilling, 0, false)
	AgentPending        = family("agent:pending:{username}", DBAgentBilling, 0, false)                                   // Isle's own: the Spring backend has no such key
	AgentDeduction      = family("agent:deduction:{username}:{deductionId}", DBAgentBilling, DeductionMarkerTTL, false)  // Isle's own: the Spring backend has no such key
	AgentBalanceInit    = family("agent:balance-init:{username}", DBAgentBilling, 0, false)                              // Isle's own: the Spring backend has no such key
	AgentBalanceLate    = family("agent:balance-late:{username}", DBAgentBilling, 0, false)                              // Isle's own: the Spring backend has no such key
	AgentBalanceEntries = family("agent:balance-entries:{username}", DBAgentBilling, 0, false)                           // Isle's own: the Spring backend has no such key
	AgentSettled        = family("agent:settled:{username}:{kind}:{entryId}", DBAgentBilling, DeductionMarkerTTL, false) // Isle's own: the Spring backend has no such key
	AgentUsage          = family("agent:usage:{modelName}", DBAgentPricing, 0, false)
	AgentUsageModels    = family("agent:usage:__models__", DBAgentPricing, 0, false)
	AgentPricing        = family("agent:pricing:{modelName}", DBAgentPricing, PricingCacheTTL, true)
	AgentPricingChanges = family("agent:pricing-changes", DBAgentPricing, 0, false) // Isle's own: a pub/sub channel, nothing is stored
	HighScore           = family("mg:score:high:{gameId}:{userId}", DBMiniGame, HighScoreTTL, true)
	Leaderboard         = family("mg:score:leaderboard:{gameId}", DBMiniGame, 0, false)
	UserMeta            = family("mg:score:user-meta:{gameId}:{userId}", DBMiniGame, UserMetaTTL, true)
	ScoreSubmitOnce     = family("mg:score:idempotency:{submitId}", DBMiniGame, ScoreSubmitTTL, false) // read only: an earlier API's claims, until they expire (ScoreClaim)
	ScoreLock           = family("mg:score:lock:{gameId}:{userId}", DBMiniGame, ScoreLockTTL, false)
	ScoreSubmitRate     = family("mg:score:submit:rate:{gameId}:{userId}", DBMiniGame, ScoreRateWindow, false)
	LeaderboardRefresh  = family("mg:score:leaderboard:refresh:rate:{gameId}:{userId}", DBMiniGame, ScoreRateWindow, false)
	GameSession         = family("mg:score:session:{gameId}:{userId}:{sessionId}", DBMiniGame, GameSessionTTL, false)
	LeaderLease         = family("isle:leader:{job}", DBDefault, 0, false)   // Isle's own: the Spring backend has no such key
	JobLock             = family("isle:job-lock:{job}", DBDefault, 0, false) // Isle's own: the Spring backend has no such key

	// DB 14: a session a score was accepted on (the session's life at most).
	GameSessionUsed = family("mg:score:session-used:{gameId}:{userId}:{sessionId}", DBMiniGame, GameSessionTTL, false) // Isle's own: the Spring backend has no such key

	// DB 14: a submit id's claim by the API and its run applied by the
	// consumer, each per user: the Spring backend's mg:score:idempotency
	// and mg:score:consume:idempotency are one per submit id, whoever sent
	// it, so one user could take another's id ahead of them (doc/games.md).
	ScoreClaim   = family("mg:score:claim:{userId}:{submitId}", DBMiniGame, ScoreSubmitTTL, false)   // Isle's own: the Spring backend has no such key
	ScoreApplied = family("mg:score:applied:{userId}:{submitId}", DBMiniGame, ScoreSubmitTTL, false) // Isle's own: set after the work, not before
)

// AgentBalance is the hot balance of a user, a decimal string with 8 places.
func (b Builder) AgentBalance(username string) string { return b.Key(AgentBalance, username) }

// AgentPending is the hash of a user's deductions not yet applied to MySQL.
func (b Builder) AgentPending(username string) string { return b.Key(AgentPending, username) }

// AgentDeduction marks a user's deduction id as taken, with the result it had.
func (b Builder) AgentDeduction(username, id string) string {
	return b.Key(AgentDeduction, username, id)
}

// AgentBalanceInit records what the last initialisation of a balance read.
func (b Builder) AgentBalanceInit(username string) string { return b.Key(AgentBalanceInit, username) }

// AgentBalanceLate holds entries applied while a balance was missing.
func (b Builder) AgentBalanceLate(username string) string { return b.Key(AgentBalanceLate, username) }

// AgentBalanceEntries counts the ledger entries the hot balance reflects
// (user_account.hot_entries, as far as this Redis knows).
func (b Builder) AgentBalanceEntries(username string) string {
	return b.Key(AgentBalanceEntries, username)
}

// AgentSettled marks a ledger entry as reflected in the Redis balance.
func (b Builder) AgentSettled(username, kind, entryID string) string {
	return b.Key(AgentSettled, username, kind, entryID)
}

// AgentPricing is the cache-aside copy of a model's pricing row.
func (b Builder) AgentPricing(model string) string { return b.Key(AgentPricing, model) }

// AgentPricingChanges is the pub/sub channel a pricing change is announced
// on (the model's name), so the API drops its in-process copy at once.
// Pub/sub channels span a server's databases; the prefix keeps fleets apart.
func (b Builder) AgentPricingChanges() string { return b.Key(AgentPricingChanges) }

// AgentUsage is the per-model usage hash.
func (b Builder) AgentUsage(model string) string { return b.Key(AgentUsage, model) }

// AgentUsageModels is the set of models with usage data.
func (b Builder) AgentUsageModels() string { return b.Key(AgentUsageModels) }

// LeaderLease is the lease of the process that schedules a group of jobs.
func (b Builder) LeaderLease(group string) string { return b.Key(LeaderLease, group) }

// JobLock is held while one job runs, by the daemon or by -once.
func (b Builder) JobLock(job string) string { return b.Key(JobLock, job) }

// BanBloom and BanSet are the user-ban Bloom bitmap and exact set.
func (b Builder) BanBloom() string { return b.Key(BanBloom) }

// BanSet is the exact set of banned usernames.
func (b Builder) BanSet() string { return b.Key(BanSet) }

// BanGeneration is the ban generation of MySQL that Redis's ban list
// reflects: every ban and unban advances it, in MySQL and here.
func (b Builder) BanGeneration() string { return b.Key(BanGeneration) }

// BanBloomRebuild and BanSetRebuild hold a ban list being rebuilt from
// MySQL (id names the rebuild) until it replaces BanBloom and BanSet.
func (b Builder) BanBloomRebuild(id string) string { return b.Key(BanBloomRebuild, id) }

// BanSetRebuild is the exact set of a ban list being rebuilt.
func (b Builder) BanSetRebuild(id string) string { return b.Key(BanSetRebuild, id) }

// ScoreSubmitRate is the per-user per-game submit counter.
func (b Builder) ScoreSubmitRate(gameID, userID string) string {
	return b.Key(ScoreSubmitRate, gameID, userID)
}

// OrderCreateLock is the SETNX lock against duplicate order creation.
func (b Builder) OrderCreateLock(product, username string) string {
	return b.Key(OrderCreateLock, product, username)
}
