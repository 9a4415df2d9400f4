package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// DeadDeduction is a stored dead billing message not replayed, as
// balance-sync judges it: whether a replay may still move a user's money.
type DeadDeduction struct {
	Ref    dlq.Ref
	DeadAt time.Time
	User   string // the username its body names; "" when it cannot be decoded
	Holds  bool   // a replay may still move User's money: User's drifts wait
	Why    string // why it died when it Holds; else why it can never apply

	refused bool // its handler refused it as permanent
}

// deadPage is how many dead rows DeadBilling lists at a time.
const deadPage = 500

// DeadBilling reads the stored dead billing messages not replayed and judges
// each (doc/money.md, "Deductions other producers take"). One holds back its
// own user's drifts, unless a replay can never apply it:
//   - its body cannot be decoded (a replay is refused the same way);
//   - it names no account, byte for byte as the ledger matches it (the
//     ledger refuses it; once such an account exists, it holds that user);
//   - it was refused as permanent (the retry middleware's x-dead-reason "permanent: ...")
//     by an account that existed when it died: the refusal is the data's,
//     and a replay meets it again. A refusal before the account existed
//     may have been for want of it, and a replay would apply: it holds.
type DeadBilling struct {
	dead     *store.DeadLetters
	accounts *store.Accounts
	domain   topology.Domain
}

// NewDeadBilling returns the reader of tp's agent-billing dead messages.
func NewDeadBilling(db *gorm.DB, tp *topology.Topology) (*DeadBilling, error) {
	d, ok := tp.Domain(topology.DomainAgentBilling)
	if !ok || !d.HasRetry() {
		return nil, fmt.Errorf("reconcile: the topology has no %s domain with a DLQ", topology.DomainAgentBilling)
	}
	return &DeadBilling{dead: store.NewDeadLetters(db), accounts: store.NewAccounts(db), domain: d}, nil
}

// Read judges every stored dead billing message not replayed, oldest first.
func (b *DeadBilling) Read(ctx context.Context) ([]DeadDeduction, error) {
	return b.read(ctx, "")
}

// Of judges the stored dead billing messages not replayed that name user,
// found by the subject the DLQ consumer stored (the body's username): the
// operator console's view of one user.
func (b *DeadBilling) Of(ctx context.Context, user string) ([]DeadDeduction, error) {
	all, err := b.read(ctx, user)
	var out []DeadDeduction
	for _, d := range all {
		if d.User == user {
			out = append(out, d)
		}
	}
	return out, err
}

// read judges the messages not replayed, of one subject or ("") all, a
// page at a time: the page's rows kept whole in the row are read in one
// statement, the others (kept in pieces, so large; or damaged) one at a
// time, so that two large messages are never in memory together. A row
// missing some of its bytes cannot be replayed and holds nobody.
func (b *DeadBilling) read(ctx context.Context, subject string) ([]DeadDeduction, error) {
	var out []DeadDeduction
	named := map[string]bool{}
	var after uint64
	for {
		page, err := b.dead.List(ctx, b.domain.DLQTable, store.DeadLetterFilter{
			Queues: []string{b.domain.DLQ}, NotReplayed: true, Subject: subject, AfterID: after, Limit: deadPage, SizesOnly: true,
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile: dead billing messages: %w", err)
		}
		whole, err := b.inline(ctx, page)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			after = r.ID
			ref := dlq.Ref{Domain: b.domain.Name, ID: r.ID}
			row, ok := whole[r.ID]
			if !ok {
				row, err = b.dead.Get(ctx, b.domain.DLQTable, r.ID)
				switch {
				case errors.Is(err, store.ErrNotFound):
					continue // deleted meanwhile
				case errors.Is(err, store.ErrIncomplete):
					out = append(out, DeadDeduction{Ref: ref, DeadAt: r.DeadAt, Why: "stored incomplete, so never replayed: " + err.Error()})
					continue
				case err != nil:
					return nil, fmt.Errorf("reconcile: dead billing message %s: %w", ref, err)
				}
			}
			d := judgeDead(ref, row)
			if d.Holds {
				named[d.User] = true
			}
			out = append(out, d)
		}
		if len(page) < deadPage {
			break
		}
	}
	if err := b.withAccounts(ctx, out, slices.Collect(maps.Keys(named))); err != nil {
		return nil, err
	}
	return out, nil
}

// inline reads whole, in one statement, the rows of page kept in the row.
// If one of them is damaged, none is read here (Get then tells which).
func (b *DeadBilling) inline(ctx context.Context, page []store.DeadLetter) (map[uint64]store.DeadLetter, error) {
	var ids []uint64
	for _, r := range page {
		if r.Parts == 0 {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := b.dead.List(ctx, b.domain.DLQTable, store.DeadLetterFilter{Queues: []string{b.domain.DLQ}, IDs: ids, Limit: len(ids)})
	switch {
	case errors.Is(err, store.ErrIncomplete):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reconcile: dead billing messages: %w", err)
	}
	out := make(map[uint64]store.DeadLetter, len(rows))
	for _, r := range rows {
		if r.Parts == 0 { // not stored again in pieces meanwhile
			out[r.ID] = r
		}
	}
	return out, nil
}

// judgeDead judges one stored message by its bytes alone: Holds is set when
// it decodes, and withAccounts then looks at its user.
func judgeDead(ref dlq.Ref, row store.DeadLetter) DeadDeduction {
	d := DeadDeduction{Ref: ref, DeadAt: row.DeadAt}
	m, err := topology.Decode[topology.AgentBillingDeduct](row.Body)
	if err != nil {
		d.Why = "cannot be decoded: " + err.Error()
		return d
	}
	d.User, d.Holds, d.Why = m.Username, true, deadReason(row)
	d.refused = strings.HasPrefix(d.Why, refusedPrefix)
	return d
}

// refusedPrefix starts the x-dead-reason of a message its handler refused
// as permanent (internal/kit/messaging/mw_retry.go, deadReason).
const refusedPrefix = "permanent:"

// deadReason is why a stored message died: the x-dead-reason header the
// retry middleware sets ("permanent: ..." or "retries exhausted ..."), or else
// its last error.
func deadReason(row store.DeadLetter) string {
	var headers map[string]any
	if json.Unmarshal([]byte(row.Headers), &headers) == nil {
		if s, ok := headers[messaging.HeaderDeadReason].(string); ok && s != "" {
			return s
		}
	}
	if row.LastError != nil && *row.LastError != "" {
		return "last error: " + *row.LastError
	}
	return "unknown reason"
}

// withAccounts clears Holds on the messages that name no account, and on
// those refused as permanent by an account that existed when they died.
func (b *DeadBilling) withAccounts(ctx context.Context, ds []DeadDeduction, users []string) error {
	if len(users) == 0 {
		return nil
	}
	created, err := b.accounts.Created(ctx, users)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for i := range ds {
		d := &ds[i]
		if !d.Holds {
			continue
		}
		switch at, ok := created[d.User]; {
		case !ok:
			d.Holds, d.Why = false, fmt.Sprintf("no account named %q: the ledger refuses it", d.User)
		case d.refused && at.Before(d.DeadAt):
			d.Holds, d.Why = false, "refused as permanent: "+strings.TrimSpace(strings.TrimPrefix(d.Why, refusedPrefix))
		}
	}
	return nil
}
