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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
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
	dead *store.DeadLetters
	tp   *topology.Topology
}

// NewStore returns a Store.
func NewStore(db *gorm.DB, tp *topology.Topology) *Store {
	return &Store{dead: store.NewDeadLetters(db), tp: tp}
}

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

// List returns the matching dead messages, newest first within each domain,
// without their body and headers (Get reads one whole).
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
		rows, err := s.dead.List(ctx, d.DLQTable, store.DeadLetterFilter{
			Queues: []string{d.DLQ}, Since: f.Since, NotReplayed: f.NotReplayed, Limit: f.Limit, NewestFirst: true, SizesOnly: true,
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

// Get returns one dead message, whole; its queue must belong to the ref's
// domain.
func (s *Store) Get(ctx context.Context, ref Ref) (Entry, error) {
	d, err := s.domain(ref.Domain)
	if err != nil {
		return Entry{}, err
	}
	row, err := s.dead.Get(ctx, d.DLQTable, ref.ID)
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

// ErrDamaged is returned for a row whose stored headers are not the JSON
// object the consumer wrote (a row cut by the INSERT IGNORE of a build
// before migration 00014): replaying it would send another message.
var ErrDamaged = errors.New("dlq: stored headers are damaged; not replayed")

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
	return s.replay(ctx, pub, d, e, force)
}

// replay claims e's row of d and republishes it, undoing the claim if the
// publish fails. e must be whole (Get) and belong to d.
func (s *Store) replay(ctx context.Context, pub Republish, d topology.Domain, e Entry, force bool) error {
	out, err := replayMessage(d, e)
	if err != nil {
		return err
	}
	claimed, err := s.dead.ClaimReplay(ctx, d.DLQTable, e.Ref.ID, force)
	if err != nil {
		return err
	}
	if !claimed {
		return fmt.Errorf("%s: %w", e.Ref, ErrAlreadyReplayed)
	}
	if err := pub.Send(ctx, out); err != nil {
		if uerr := s.dead.UnclaimReplay(context.WithoutCancel(ctx), d.DLQTable, e.Ref.ID, e.ReplayedAt); uerr != nil {
			return errors.Join(fmt.Errorf("dlq: replay %s: %w", e.Ref, err), uerr)
		}
		return fmt.Errorf("dlq: replay %s: %w", e.Ref, err)
	}
	return nil
}

// replayMessage is what a replay of e publishes: the stored message on d's
// main routing key, with its replay count. The type is the stored
// __TypeId__ header, whole, where there is one (the message_type column is
// cut to 255 bytes).
func replayMessage(d topology.Domain, e Entry) (messaging.Outgoing, error) {
	headers, err := replayHeaders(e.Headers, d)
	if err != nil {
		return messaging.Outgoing{}, fmt.Errorf("%s: %w: %v", e.Ref, ErrDamaged, err)
	}
	out := messaging.Outgoing{
		RoutingKey: d.RoutingKey,
		Body:       e.Body,
		MessageID:  e.MessageID,
		TypeID:     cmp.Or(headers[messaging.HeaderTypeID], e.MessageType),
		TraceID:    e.TraceID,
		Headers:    headers,
	}
	out.Headers[messaging.HeaderReplay] = strconv.Itoa(e.ReplayCount + 1)
	return out, nil
}

// replayHeaders keeps the stored headers but the retry count and the failure
// bookkeeping. The broker's death headers and watermill's are left in: the
// Publisher's Marshaler drops them from every publish. Numbers keep their
// stored digits. Stored headers that are not a JSON object are an error.
func replayHeaders(stored string, d topology.Domain) (map[string]string, error) {
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(stored))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("text after the headers object")
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch k {
		case d.RetryHeader, messaging.HeaderLastError, messaging.HeaderDeadReason, messaging.HeaderReplay:
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
	return out, nil
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
	d, err := s.domain(domain)
	if err != nil {
		return Result{}, err
	}
	// List reads summaries; each row is read whole just before its replay,
	// so that a batch of large messages is never in memory at once.
	entries, err := s.List(ctx, Filter{Domains: []string{domain}, NotReplayed: !force, Limit: limit})
	if err != nil {
		return Result{}, err
	}
	var res Result
	var errs []error
	for _, e := range entries {
		whole, err := s.Get(ctx, e.Ref)
		if err == nil {
			err = s.replay(ctx, pub, d, whole, force)
		}
		switch {
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
