package dlq

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store"
)

// State selects dead messages by whether they were replayed.
type State string

// States of Query.
const (
	StateWaiting  State = ""         // not replayed (the default)
	StateReplayed State = "replayed" // replayed at least once
	StateAll      State = "all"
)

// Query selects a page of dead messages across domains, newest first.
type Query struct {
	Domains []string  // empty = every domain with a DLQ
	Reason  string    // the last error contains this text
	Since   time.Time // dead at or after; zero = any time
	State   State
	Limit   int    // per page; default 50
	Before  Cursor // the page after this place; zero = the newest
}

// PageLimitDefault is Query.Limit's default.
const PageLimitDefault = 50

// Cursor is a place in the order Page lists: dead_at, then domain, then
// id, each descending. It prints as "unixmicro.domain.id" for a URL.
type Cursor struct {
	At     time.Time
	Domain string
	ID     uint64
}

// IsZero reports whether c is the start of the listing.
func (c Cursor) IsZero() bool { return c.At.IsZero() }

func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.At.UnixMicro(), 10) + "." + c.Domain + "." + strconv.FormatUint(c.ID, 10)
}

// ParseCursor reads Cursor.String's form; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	at, rest, ok1 := strings.Cut(s, ".")
	dom, id, ok2 := strings.Cut(rest, ".")
	us, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseUint(id, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || us <= 0 || dom == "" {
		return Cursor{}, fmt.Errorf("dlq: %q is not a page cursor", s)
	}
	return Cursor{At: time.UnixMicro(us).UTC(), Domain: dom, ID: n}, nil
}

// Page is one page of dead messages, summaries only (no body or headers).
type Page struct {
	Entries []Entry
	Next    Cursor // where the next page starts; zero on the last page
}

// Page lists the dead messages q selects, newest first across domains. Each
// domain's table is read on its (replayed_at, dead_at) or dead_at index,
// at most one page plus one row, whatever the table holds.
func (s *Store) Page(ctx context.Context, q Query) (Page, error) {
	limit := cmp.Or(q.Limit, PageLimitDefault)
	domains := q.Domains
	if len(domains) == 0 {
		domains = s.Domains()
	}
	var all []Entry
	for _, name := range domains {
		d, err := s.domain(name)
		if err != nil {
			return Page{}, err
		}
		f := store.DeadLetterFilter{
			Queues: []string{d.DLQ}, Since: q.Since, ErrorContains: q.Reason,
			NotReplayed: q.State == StateWaiting, Replayed: q.State == StateReplayed,
			ByDeadAt: true, Before: tableCursor(q.Before, name), Limit: limit + 1, SizesOnly: true,
		}
		rows, err := s.dead.List(ctx, d.DLQTable, f)
		if err != nil {
			return Page{}, err
		}
		for _, r := range rows {
			all = append(all, Entry{Ref: Ref{Domain: name, ID: r.ID}, DeadLetter: r})
		}
	}
	slices.SortFunc(all, func(a, b Entry) int { return compareDesc(cursorOf(a), cursorOf(b)) })
	var p Page
	if len(all) > limit {
		all = all[:limit]
		p.Next = cursorOf(all[limit-1])
	}
	p.Entries = all
	return p, nil
}

func cursorOf(e Entry) Cursor { return Cursor{At: e.DeadAt, Domain: e.Ref.Domain, ID: e.Ref.ID} }

// compareDesc orders cursors newest first: by time, then domain, then id,
// each descending.
func compareDesc(a, b Cursor) int {
	if c := b.At.Compare(a.At); c != 0 {
		return c
	}
	if c := strings.Compare(b.Domain, a.Domain); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// tableCursor is where one domain's rows continue after c: rows at c's
// instant come after c when their domain sorts below c's (all of them),
// with it (those of a smaller id), or above it (none).
func tableCursor(c Cursor, domain string) store.DeadLetterCursor {
	switch {
	case c.IsZero():
		return store.DeadLetterCursor{}
	case domain < c.Domain:
		return store.DeadLetterCursor{At: c.At, ID: math.MaxUint64}
	case domain == c.Domain:
		return store.DeadLetterCursor{At: c.At, ID: c.ID}
	default:
		return store.DeadLetterCursor{At: c.At}
	}
}

// History lists the stored deaths of e's message in its domain, oldest
// first: one row per time it reached the DLQ (a replay that failed again
// stores another), without bodies.
func (s *Store) History(ctx context.Context, e Entry) ([]Entry, error) {
	d, err := s.domain(e.Ref.Domain)
	if err != nil || e.MessageID == "" {
		return nil, err
	}
	rows, err := s.dead.List(ctx, d.DLQTable, store.DeadLetterFilter{
		Queues: []string{d.DLQ}, MessageID: e.MessageID, Limit: 100, SizesOnly: true,
	})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = Entry{Ref: Ref{Domain: e.Ref.Domain, ID: r.ID}, DeadLetter: r}
	}
	return out, nil
}

// Waiting counts each domain's dead messages not replayed yet.
func (s *Store) Waiting(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64)
	for _, name := range s.Domains() {
		d, _ := s.domain(name)
		n, err := s.dead.Count(ctx, d.DLQTable, store.DeadLetterFilter{Queues: []string{d.DLQ}, NotReplayed: true})
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}
