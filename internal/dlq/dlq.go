// Package dlq reads and replays the dead messages the DLQ consumers stored
// in MySQL. `islectl dlq` and the reconciler's dlq-replay job use it.
//
// A dead message is named by its domain and row id, e.g. "email/12"
// (payment notify and receipt share one table, so their ids share one
// sequence). Replaying republishes the stored body to the domain's main
// routing key with the retry count reset, and marks the row replayed first:
// a row is replayed at most once per request, and only once in all unless
// forced.
package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Ref names one dead message.
type Ref struct {
	Domain string
	ID     uint64
}

func (r Ref) String() string { return r.Domain + "/" + strconv.FormatUint(r.ID, 10) }

// ParseRef reads "domain/id".
func ParseRef(s string) (Ref, error) {
	dom, id, ok := strings.Cut(s, "/")
	n, err := strconv.ParseUint(id, 10, 64)
	if !ok || err != nil || n == 0 || dom == "" {
		return Ref{}, fmt.Errorf("dlq: %q: want domain/id, e.g. email/12", s)
	}
	return Ref{Domain: dom, ID: n}, nil
}

// Entry is one stored dead message.
type Entry struct {
	Ref
	store.DeadLetter
}

// Store reads dead messages of one topology.
type Store struct {
	db *gorm.DB
	tp *topology.Topology
}

// NewStore returns a Store.
func NewStore(db *gorm.DB, tp *topology.Topology) *Store { return &Store{db: db, tp: tp} }

func (s *Store) domain(name string) (topology.Domain, error) {
	d, ok := s.tp.Domain(name)
	if !ok || !d.HasRetry() {
		return topology.Domain{}, fmt.Errorf("dlq: %q is not a domain with a DLQ", name)
	}
	return d, nil
}

// Domains lists the domains that have a DLQ.
func (s *Store) Domains() []string {
	var out []string
	for _, d := range s.tp.Domains() {
		if d.HasRetry() {
			out = append(out, d.Name)
		}
	}
	return out
}

// Filter selects dead messages for List.
type Filter struct {
	Domains     []string // empty = every domain
	Since       time.Time
	NotReplayed bool
	Limit       int // per domain; default 100
}

// List returns the matching dead messages, newest first within each domain.
func (s *Store) List(ctx context.Context, f Filter) ([]Entry, error) {
	domains := f.Domains
	if len(domains) == 0 {
		domains = s.Domains()
	}
	var out []Entry
	for _, name := range domains {
		d, err := s.domain(name)
		if err != nil {
			return nil, err
		}
		rows, err := store.ListDeadLetters(ctx, s.db, d.DLQTable, store.DeadLetterFilter{
			Queues: []string{d.DLQ}, Since: f.Since, NotReplayed: f.NotReplayed, Limit: f.Limit, NewestFirst: true,
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out = append(out, Entry{Ref: Ref{Domain: name, ID: r.ID}, DeadLetter: r})
		}
	}
	return out, nil
}

// Get returns one dead message; its queue must belong to the ref's domain.
func (s *Store) Get(ctx context.Context, ref Ref) (Entry, error) {
	d, err := s.domain(ref.Domain)
	if err != nil {
		return Entry{}, err
	}
	row, err := store.GetDeadLetter(ctx, s.db, d.DLQTable, ref.ID)
	if err == nil && row.Queue != d.DLQ {
		err = fmt.Errorf("dlq: %s: row %d came from %s, not %s: %w", ref, ref.ID, row.Queue, d.DLQ, store.ErrNotFound)
	}
	if err != nil {
		return Entry{}, err
	}
	return Entry{Ref: ref, DeadLetter: row}, nil
}

// Republish is the publishing a replay needs.
type Republish interface {
	Send(ctx context.Context, out messaging.Outgoing) error
}

// ErrAlreadyReplayed is returned for a row replayed before, without force.
var ErrAlreadyReplayed = errors.New("dlq: already replayed (use force to replay again)")

// Replay republishes one dead message to its domain's main routing key with
// the retry count reset, and marks the row replayed. The row is claimed
// before publishing, so two replays of one row at once publish it once; if
// the publish fails the claim is undone.
func (s *Store) Replay(ctx context.Context, pub Republish, ref Ref, force bool) error {
	e, err := s.Get(ctx, ref)
	if err != nil {
		return err
	}
	d, _ := s.domain(ref.Domain)
	claimed, err := store.ClaimReplay(ctx, s.db, d.DLQTable, ref.ID, force)
	if err != nil {
		return err
	}
	if !claimed {
		return fmt.Errorf("%s: %w", ref, ErrAlreadyReplayed)
	}
	out := messaging.Outgoing{
		RoutingKey: d.RoutingKey,
		Body:       e.Body,
		MessageID:  e.MessageID,
		TypeID:     e.MessageType,
		TraceID:    e.TraceID,
		Headers:    replayHeaders(e.Headers, d),
	}
	out.Headers[messaging.HeaderReplay] = strconv.Itoa(e.ReplayCount + 1)
	if err := pub.Send(ctx, out); err != nil {
		if uerr := store.UnclaimReplay(context.WithoutCancel(ctx), s.db, d.DLQTable, ref.ID, e.ReplayedAt); uerr != nil {
			return errors.Join(fmt.Errorf("dlq: replay %s: %w", ref, err), uerr)
		}
		return fmt.Errorf("dlq: replay %s: %w", ref, err)
	}
	return nil
}

// replayHeaders keeps the stored headers but the retry count, the failure
// bookkeeping and the broker's death headers.
func replayHeaders(stored string, d topology.Domain) map[string]string {
	var raw map[string]any
	_ = json.Unmarshal([]byte(stored), &raw)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch {
		case k == d.RetryHeader, k == messaging.HeaderLastError, k == messaging.HeaderDeadReason, k == messaging.HeaderReplay,
			k == "x-death", strings.HasPrefix(k, "x-first-death-"), strings.HasPrefix(k, "x-last-death-"), strings.HasPrefix(k, "_watermill"):
			continue
		}
		switch x := v.(type) {
		case string:
			out[k] = x
		case nil:
		default:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		}
	}
	return out
}

// Result counts what ReplayAll did.
type Result struct {
	Replayed int
	Skipped  int // replayed before (without force)
	Failed   int
}

// ReplayAll replays the dead messages of a domain, not replayed before
// unless force, at most limit (0 = 1000).
func (s *Store) ReplayAll(ctx context.Context, pub Republish, domain string, force bool, limit int) (Result, error) {
	if limit <= 0 {
		limit = 1000
	}
	entries, err := s.List(ctx, Filter{Domains: []string{domain}, NotReplayed: !force, Limit: limit})
	if err != nil {
		return Result{}, err
	}
	var res Result
	var errs []error
	for _, e := range entries {
		switch err := s.Replay(ctx, pub, e.Ref, force); {
		case err == nil:
			res.Replayed++
		case errors.Is(err, ErrAlreadyReplayed):
			res.Skipped++
		default:
			res.Failed++
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}
