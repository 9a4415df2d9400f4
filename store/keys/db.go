// Package keys builds every Redis key Isle uses (doc/keys.md), and knows the
// logical database, TTL and namespace of each key family. Call sites never
// concatenate key strings: they call a builder method, and SCAN
// patterns come from the same builder.
//
// The key policy splits keys into a volatile namespace, wiped at start-up, and a
// persistent one. Isle keeps the Spring backend's key names (they are shared with the
// Java backend), so the split is a property of each Family instead of a
// name prefix: caches are Volatile; balances, ledgers of pending work,
// limits, idempotency markers, locks and the leader lease are not.
//
// An optional global prefix is put in front of every key, so tests and
// several fleets can share one Redis.
package keys

// DB is a logical Redis database (doc/keys.md).
type DB int

// The logical databases. Verify and Identity share index 2 by default, as in the Spring backend.
const (
	DBDefault DB = iota
	DBAvatar
	DBVerify
	DBIdentity
	DBWallpaper
	DBSliderCaptcha
	DBTOTP
	DBAuthSecurity
	DBUploadRate
	DBIssueFeedback
	DBUserBan
	DBPayment
	DBQWeather
	DBAgentBilling
	DBAgentPricing
	DBMiniGame
	numDBs
)

type dbInfo struct {
	env     string
	index   int
	purpose string
}

var dbs = [numDBs]dbInfo{
	DBDefault:       {"REDIS_DATABASE", 0, "default database; Isle's leader leases"},
	DBAvatar:        {"REDIS_AVATAR_DATABASE", 1, "avatar cache"},
	DBVerify:        {"REDIS_VERIFY_DATABASE", 2, "email verification codes and limits"},
	DBIdentity:      {"REDIS_IDENTITY_DATABASE", 2, "identity verification limits and status cache"},
	DBWallpaper:     {"REDIS_WALLPAPER_DATABASE", 3, "wallpaper cache"},
	DBSliderCaptcha: {"REDIS_SLIDER_CAPTCHA_DATABASE", 4, "slider CAPTCHA"},
	DBTOTP:          {"REDIS_TOTP_DATABASE", 5, "TOTP security"},
	DBAuthSecurity:  {"REDIS_AUTH_SECURITY_DATABASE", 6, "auth rate limits and replay protection"},
	DBUploadRate:    {"REDIS_UPLOAD_RATE_DATABASE", 7, "upload rate limits"},
	DBIssueFeedback: {"REDIS_ISSUE_FEEDBACK_DATABASE", 8, "issue feedback rate limits"},
	DBUserBan:       {"REDIS_USER_BAN_DATABASE", 9, "user ban Bloom filter"},
	DBPayment:       {"REDIS_PAYMENT_DATABASE", 10, "payment orders, locks and pricing"},
	DBQWeather:      {"REDIS_QWEATHER_DATABASE", 11, "weather cache and translation quota"},
	DBAgentBilling:  {"REDIS_AGENT_BILLING_DATABASE", 12, "agent balances"},
	DBAgentPricing:  {"REDIS_AGENT_PRICING_DATABASE", 13, "agent usage stats and pricing cache"},
	DBMiniGame:      {"REDIS_MINI_GAME_DATABASE", 14, "mini game scores, leaderboards and sessions"},
}

// DBs lists every logical database in index order.
func DBs() []DB {
	out := make([]DB, numDBs)
	for i := range out {
		out[i] = DB(i)
	}
	return out
}

// EnvVar is the environment variable that selects the database index.
func (d DB) EnvVar() string { return dbs[d].env }

// DefaultIndex is the Spring backend's index of the database.
func (d DB) DefaultIndex() int { return dbs[d].index }

// Purpose says what the database holds.
func (d DB) Purpose() string { return dbs[d].purpose }

// IndexIn is db's index given overrides by logical database (configuration):
// the override, or the Spring backend's default.
func (db DB) IndexIn(overrides map[DB]int) int {
	if i, ok := overrides[db]; ok {
		return i
	}
	return db.DefaultIndex()
}
