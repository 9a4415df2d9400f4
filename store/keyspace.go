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
// that does. The usage statistics count requests by the same keys.
const (
	foreignPrefix = "msg:"    // a message's id
	hashedPrefix  = "sha256:" // the hash of a key too long for its column, or not UTF-8
)

// ForeignKeyPrefixes are the prefixes of derived keys.
var ForeignKeyPrefixes = []string{foreignPrefix, hashedPrefix}

// ForeignKey is the key of a message that carries no id of Isle's: "msg:"
// and its message id, or, when that is longer than max bytes or not valid
// UTF-8 (which a MySQL column would not keep byte for byte), "sha256:" and
// its SHA-256, which is as stable.
func ForeignKey(messageID string, max int) string {
	key := foreignPrefix + messageID
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
