package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// The email code limits (their keys: doc/keys.md, database 2).
const (
	CodeIPPerHour     = 3
	CodeEmailPerHour  = 3
	CodeEmailPerDay   = 30
	CodeAttempts      = 5
	codeDigits        = 6
	codeHMACDomainSep = "isle-email-code\x00"
)

// ErrCodeLimited is returned by Issue when a limit refuses a new code.
type ErrCodeLimited struct {
	Limit      string        // cooldown, ip, email-hour, email-day
	RetryAfter time.Duration // until the limit lifts
}

func (e *ErrCodeLimited) Error() string {
	return fmt.Sprintf("store: email code refused by the %s limit for %s", e.Limit, e.RetryAfter.Round(time.Second))
}

// Outcomes of EmailCodes.Check other than a match.
var (
	ErrCodeNone   = errors.New("store: no code for this address and scene, or it expired")
	ErrCodeLocked = errors.New("store: too many wrong codes; ask for a new one")
	ErrCodeWrong  = errors.New("store: wrong code")
)

// EmailCodes are the email verification codes of Redis DB 2: only an HMAC
// of each code is kept (keyed by the pepper, over scene, address and code),
// with the Spring backend's limits on sending and on wrong attempts.
type EmailCodes struct {
	r      *Redis
	pepper []byte
	now    func() time.Time
}

// NewEmailCodes returns the email codes of r, hashed with pepper.
func NewEmailCodes(r *Redis, pepper []byte) *EmailCodes {
	return &EmailCodes{r: r, pepper: pepper, now: time.Now}
}

// NormalizeEmail is the form of an address the keys and the HMAC use: its
// limits cannot be dodged by changing letter case.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

func (c *EmailCodes) hash(scene, email, code string) string {
	m := hmac.New(sha256.New, c.pepper)
	m.Write([]byte(codeHMACDomainSep + scene + "\x00" + NormalizeEmail(email) + "\x00" + code))
	return hex.EncodeToString(m.Sum(nil))
}

// untilEndOfDay is the time left in the UTC+8 day of now.
func untilEndOfDay(now time.Time) time.Duration {
	t := now.In(topology.UTC8)
	end := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, topology.UTC8)
	return end.Sub(t)
}

// Issue draws a code for email in scene and keeps its HMAC, unless a limit
// refuses (*ErrCodeLimited): a cooldown of 60 s per scene and address, 3 an
// hour per client IP, 3 an hour and 30 a day (to the end of the UTC+8 day)
// per address. A new code replaces the last, with fresh attempts.
func (c *EmailCodes) Issue(ctx context.Context, scene, email, ip string) (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	code := fmt.Sprintf("%0*d", codeDigits, n.Int64())
	addr := NormalizeEmail(email)
	k := c.r.Keys()
	ks := []string{
		k.Key(keys.VerifyCode, scene, addr), k.Key(keys.VerifyAttempts, scene, addr), k.Key(keys.VerifyCooldown, scene, addr),
		k.Key(keys.VerifyRateIP, ip), k.Key(keys.VerifyRateHour, addr), k.Key(keys.VerifyRateDay, addr),
	}
	res, err := codeIssueScript.Run(ctx, c.r.Client(keys.VerifyCode.DB), ks, c.hash(scene, addr, code),
		keys.VerifyCodeTTL.Milliseconds(), keys.VerifyCooldownTTL.Milliseconds(),
		CodeIPPerHour, keys.VerifyRateIPTTL.Milliseconds(), CodeEmailPerHour, keys.VerifyRateHourTTL.Milliseconds(),
		CodeEmailPerDay, untilEndOfDay(c.now()).Milliseconds()).Slice()
	if err != nil {
		return "", fmt.Errorf("store: issue email code: %w", err)
	}
	verdict, wait, err := scriptPair(res)
	if err != nil {
		return "", fmt.Errorf("store: issue email code: %w", err)
	}
	if verdict != "OK" {
		return "", &ErrCodeLimited{Limit: verdict, RetryAfter: time.Duration(wait) * time.Millisecond}
	}
	return code, nil
}

// Check compares code with the one issued for email in scene: nil uses it
// up; ErrCodeWrong (with the attempts left), ErrCodeLocked after the
// fifth wrong code, ErrCodeNone when there is none.
func (c *EmailCodes) Check(ctx context.Context, scene, email, code string) (attemptsLeft int, err error) {
	addr := NormalizeEmail(email)
	k := c.r.Keys()
	res, err := codeCheckScript.Run(ctx, c.r.Client(keys.VerifyCode.DB),
		[]string{k.Key(keys.VerifyCode, scene, addr), k.Key(keys.VerifyAttempts, scene, addr)},
		c.hash(scene, addr, code), CodeAttempts).Slice()
	if err != nil {
		return 0, fmt.Errorf("store: check email code: %w", err)
	}
	verdict, n, err := scriptPair(res)
	if err != nil {
		return 0, fmt.Errorf("store: check email code: %w", err)
	}
	switch verdict {
	case "OK":
		return 0, nil
	case "NONE":
		return 0, ErrCodeNone
	case "LOCKED":
		return 0, ErrCodeLocked
	default:
		return int(n), ErrCodeWrong
	}
}

// scriptPair reads a script's {verdict, number} answer.
func scriptPair(res []any) (string, int64, error) {
	if len(res) != 2 {
		return "", 0, fmt.Errorf("unexpected answer %v", res)
	}
	s, ok1 := res[0].(string)
	n, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return "", 0, fmt.Errorf("unexpected answer %v", res)
	}
	return s, n, nil
}

// Cancel withdraws the code issued for email in scene and its cooldown (the
// caller could not send it), so a new one may be asked for at once; the
// hourly and daily counts keep it.
func (c *EmailCodes) Cancel(ctx context.Context, scene, email string) error {
	addr := NormalizeEmail(email)
	k := c.r.Keys()
	return c.r.Client(keys.VerifyCode.DB).Del(ctx, k.Key(keys.VerifyCode, scene, addr), k.Key(keys.VerifyCooldown, scene, addr)).Err()
}
