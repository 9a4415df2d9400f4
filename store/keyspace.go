package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Deduction ids, the ledger's (username, DEDUCT, entry_id) key, come from
// two sources that must never meet: the API's request ids (and the pending
// records deduct.lua keeps under them), and the keys derived for messages
// that carry no deduction id, the Spring producers' (ForeignKey). Every
// derived key begins with one of ForeignKeyPrefixes; the API refuses a
// request id that does (IsForeignKey), and the consumer a deductionId
// that does.
//
// The usage statistics count usages by key too (agent_usage_event), where
// a request's id is Isle's own "username:requestId", which no rule keeps
// out of the derived keys' space (a user named "msg"): there a request's
// key is RequestKey, "req:" and the id, so that the two spaces are apart by
// construction.
const (
	foreignPrefix = "msg:"    // a message's id
	requestPrefix = "req:"    // a usage message's request id
	hashedPrefix  = "sha256:" // the hash of a key too long for its column, or not UTF-8
)

// ForeignKeyPrefixes are the prefixes of derived keys.
var ForeignKeyPrefixes = []string{foreignPrefix, hashedPrefix}

// ForeignKey is the key of a message that carries no id of Isle's: "msg:"
// and its message id, or, when that is longer than max bytes or not valid
// UTF-8 (which a MySQL column would not keep byte for byte), "sha256:" and
// its SHA-256, which is as stable.
func ForeignKey(messageID string, max int) string { return derivedKey(foreignPrefix, messageID, max) }

// RequestKey is the usage key of a usage message that carries a request id:
// "req:" and the id, or, like ForeignKey, "sha256:" and the SHA-256 of that
// when it does not fit max bytes or is not UTF-8. It never equals a
// ForeignKey: the hashed forms are hashes of keys with different prefixes.
func RequestKey(requestID string, max int) string { return derivedKey(requestPrefix, requestID, max) }

// UsageRequestID is the request id the API's usage message carries for a
// charge: "username:requestId" (request ids are the client's, unique per
// user). Its usage key is RequestKey of it, which the reconciler also gives
// the usage of a pending record, so that each is counted once whichever
// counts it first.
func UsageRequestID(username, requestID string) string { return username + ":" + requestID }

// legacyRequestKey is, for a RequestKey in its plain form, the key an older
// build counted the same request under (the request id alone), when that
// cannot be another kind's key; "" otherwise.
func legacyRequestKey(key string) string {
	id, ok := strings.CutPrefix(key, requestPrefix)
	if !ok || IsForeignKey(id) || strings.HasPrefix(id, requestPrefix) {
		return ""
	}
	return id
}

// derivedKey is prefix and id, or prefix's hashed form when that does not
// fit max bytes or is not valid UTF-8 (which a MySQL column would not keep
// byte for byte).
func derivedKey(prefix, id string, max int) string {
	key := prefix + id
	if len(key) <= max && utf8.ValidString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// IsForeignKey reports whether id is in the namespace of derived keys,
// where no request id may be.
func IsForeignKey(id string) bool {
	for _, p := range ForeignKeyPrefixes {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// Recharge ids, the ledger's (username, RECHARGE, entry_id) key, come from
// paid orders (their out trade number, order.NewOutTradeNo), opening balances
// (OpeningEntryID) and operators (OperatorCreditID), which never meet.
const operatorPrefix = "islectl:"

// OperatorCreditID is the ledger id of a recharge an operator makes with
// id (islectl users credit): "islectl:" and id, so that no id an operator
// picks can name a paid order's recharge or an opening balance, which
// would then never be credited. An id that already begins so is kept.
func OperatorCreditID(id string) string {
	if strings.HasPrefix(id, operatorPrefix) {
		return id
	}
	return operatorPrefix + id
}
