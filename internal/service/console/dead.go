package console

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
)

// deadFilter is the dead-message list's form, as the operator wrote it.
type deadFilter struct {
	Domain string
	Reason string
	Since  string
	State  string
}

// deadListData is the dead-message list page.
type deadListData struct {
	Domains    []string
	States     []string
	Filter     deadFilter
	Entries    []dlq.Entry
	Next       string // the next page's URL; "" on the last
	First      string // the first page's URL, when this is a later one
	CanReplay  bool
	SinceHints []string
}

// reasonMax bounds the reason filter's text.
const reasonMax = 200

func (c *Console) deadList(w http.ResponseWriter, r *http.Request) (rendered, error) {
	q := r.URL.Query()
	f := deadFilter{Domain: q.Get("domain"), Reason: strings.TrimSpace(q.Get("reason")), Since: strings.TrimSpace(q.Get("since")), State: q.Get("state")}
	query := dlq.Query{Reason: f.Reason, State: dlq.State(f.State)}
	if f.Domain != "" {
		if !slices.Contains(c.dead.Domains(), f.Domain) {
			return rendered{}, errorf(http.StatusBadRequest, "domain %q has no dead messages (want one of %s)", f.Domain, strings.Join(c.dead.Domains(), ", "))
		}
		query.Domains = []string{f.Domain}
	}
	if len(f.Reason) > reasonMax {
		return rendered{}, errorf(http.StatusBadRequest, "the reason filter is longer than %d bytes", reasonMax)
	}
	switch query.State {
	case dlq.StateWaiting, dlq.StateReplayed, dlq.StateAll:
	default:
		return rendered{}, errorf(http.StatusBadRequest, "state %q: want replayed, all or none", f.State)
	}
	var err error
	if query.Since, err = parseSince(f.Since, c.now()); err != nil {
		return rendered{}, errorf(http.StatusBadRequest, "since %q: %v", f.Since, err)
	}
	if query.Before, err = dlq.ParseCursor(q.Get("before")); err != nil {
		return rendered{}, errorf(http.StatusBadRequest, "%v", err)
	}
	page, err := c.dead.Page(r.Context(), query)
	if err != nil {
		return rendered{}, err
	}
	d := deadListData{
		Domains: c.dead.Domains(), States: []string{"", string(dlq.StateReplayed), string(dlq.StateAll)}, Filter: f,
		Entries: page.Entries, CanReplay: c.backends.Publisher != nil, SinceHints: []string{"15m", "1h", "24h", "7d"},
	}
	if !page.Next.IsZero() {
		d.Next = c.deadURL(f, page.Next.String())
	}
	if !query.Before.IsZero() {
		d.First = c.deadURL(f, "")
	}
	return rendered{file: "dead.html", title: "Dead messages", nav: "dead", data: d}, nil
}

// deadURL is the list's URL with filter f, from the cursor before.
func (c *Console) deadURL(f deadFilter, before string) string {
	v := url.Values{}
	for k, s := range map[string]string{"domain": f.Domain, "reason": f.Reason, "since": f.Since, "state": f.State, "before": before} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return c.path("/dead")
	}
	return c.path("/dead") + "?" + v.Encode()
}

// parseSince reads the time filter: a duration back from now ("90m", "24h",
// "7d"), an RFC 3339 time, or a browser's datetime-local or date in UTC.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a duration (90m, 24h, 7d) or a time (2026-05-01T12:00)")
}

// deadOneData is one dead message's page.
type deadOneData struct {
	Entry      dlq.Entry
	MaxRetries int
	DeadReason string
	Replays    string // the x-replay-count it carried
	TraceID    string // the W3C trace of its traceparent header, if it had one (doc/tracing.md)
	Headers    [][2]string
	HeadersRaw string // when the stored headers are not a JSON object
	Body       string
	BodyNote   string // how the body is shown: JSON indented, text, base64, cut
	History    []dlq.Entry
	CanReplay  bool
}

// traceOf is the trace id of a W3C traceparent ("00-<trace>-<span>-<flags>"),
// or "" when it is not one.
func traceOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return ""
	}
	return parts[1]
}

// bodyShown bounds the body a page shows.
const bodyShown = 256 << 10

func (c *Console) deadOne(w http.ResponseWriter, r *http.Request) (rendered, error) {
	ref, err := dlq.ParseRef(r.PathValue("domain") + "/" + r.PathValue("id"))
	if err != nil {
		return rendered{}, errorf(http.StatusBadRequest, "%v", err)
	}
	if !slices.Contains(c.dead.Domains(), ref.Domain) {
		return rendered{}, errorf(http.StatusNotFound, "no domain %q with dead messages", ref.Domain)
	}
	e, err := c.dead.Get(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) {
		return rendered{}, errorf(http.StatusNotFound, "no dead message %s", ref)
	}
	if err != nil {
		return rendered{}, err
	}
	dom, _ := c.backends.Topology.Domain(ref.Domain)
	d := deadOneData{Entry: e, MaxRetries: dom.Retry.MaxRetries, CanReplay: c.backends.Publisher != nil}
	d.Headers, d.HeadersRaw = headerRows(e.Headers)
	for _, h := range d.Headers {
		switch h[0] {
		case messaging.HeaderDeadReason:
			d.DeadReason = h[1]
		case messaging.HeaderReplay:
			d.Replays = h[1]
		case "traceparent":
			d.TraceID = traceOf(h[1])
		}
	}
	d.Body, d.BodyNote = showBody(e.Body)
	if d.History, err = c.dead.History(r.Context(), e); err != nil {
		return rendered{}, err
	}
	d.Entry.Body, d.Entry.Headers = nil, "" // shown as Body and Headers
	return rendered{file: "dead_one.html", title: "Dead message " + ref.String(), nav: "dead", data: d}, nil
}

// headerRows are the stored headers, sorted by name, with each value as
// text; headers that are not a JSON object come back raw.
func headerRows(stored string) ([][2]string, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stored), &m); err != nil {
		return nil, stored
	}
	rows := make([][2]string, 0, len(m))
	for k, raw := range m {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		rows = append(rows, [2]string{k, s})
	}
	slices.SortFunc(rows, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return rows, ""
}

// showBody renders a body for reading: JSON indented (numbers and member
// order as stored), other UTF-8 text as is, anything else as base64; at
// most bodyShown bytes of it.
func showBody(b []byte) (string, string) {
	note := ""
	if len(b) > bodyShown {
		note = "the first " + humanBytes(bodyShown) + " of " + humanBytes(int64(len(b))) + "; "
		b = b[:bodyShown]
		return string(bytes.ToValidUTF8(b, []byte("\uFFFD"))), note + "text"
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") == nil {
		return out.String(), note + "JSON, indented"
	}
	if utf8.Valid(b) {
		return string(b), note + "text"
	}
	return base64.StdEncoding.EncodeToString(b), note + "not UTF-8: base64"
}

// replayedData is the page of a replay's results.
type replayedData struct {
	Results []replayResult
	Failed  int
}

// replayMax bounds the dead messages one form replays.
const replayMax = 500

// replayResult is what a replay of one dead message did.
type replayResult struct {
	Ref dlq.Ref
	OK  bool
	Msg string
}

// replay republishes the dead messages the form names (ref=domain/id,
// repeated), each at most once unless force is set, and shows each result.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) (rendered, error) {
	if c.backends.Publisher == nil {
		return rendered{}, errorf(http.StatusServiceUnavailable, "this console has no connection to RabbitMQ to replay with")
	}
	raw := r.PostForm["ref"]
	force := r.PostForm.Get("force") != ""
	switch {
	case len(raw) == 0:
		return rendered{}, errorf(http.StatusBadRequest, "select at least one dead message to replay")
	case len(raw) > replayMax:
		return rendered{}, errorf(http.StatusBadRequest, "%d dead messages selected; replay at most %d at once", len(raw), replayMax)
	}
	refs := make([]dlq.Ref, len(raw))
	for i, s := range raw {
		ref, err := dlq.ParseRef(s)
		if err != nil {
			return rendered{}, errorf(http.StatusBadRequest, "%v", err)
		}
		refs[i] = ref
	}
	who := c.backends.Operator(r)
	results := make([]replayResult, len(refs))
	failed := 0
	for i, ref := range refs {
		err := c.dead.Replay(r.Context(), c.backends.Publisher, ref, force)
		results[i] = replayResult{Ref: ref, OK: err == nil, Msg: "replayed: sent to " + ref.Domain + "'s main queue"}
		switch {
		case errors.Is(err, dlq.ErrAlreadyReplayed):
			results[i].Msg = "not replayed: it was replayed before (tick \"again\" to replay it once more)"
		case errors.Is(err, store.ErrNotFound):
			results[i].Msg = "not replayed: no such dead message"
		case err != nil:
			results[i].Msg = "not replayed: " + err.Error()
		}
		if err != nil {
			failed++
		}
		c.backends.Log.InfoContext(r.Context(), "console: replay", "operator", who, "ref", ref.String(), "force", force, "ok", err == nil, "err", err)
	}
	return rendered{file: "replayed.html", title: "Replay", nav: "dead", data: replayedData{Results: results, Failed: failed}}, nil
}
