package topology

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// Live is what a broker holds, as read through the management API.
type Live struct {
	Exchanges map[string]LiveExchange
	Queues    map[string]LiveQueue
	Bindings  []Binding
}

// LiveExchange is an exchange as the broker reports it.
type LiveExchange struct {
	Type       string
	Durable    bool
	AutoDelete bool
}

// LiveQueue is a queue as the broker reports it.
type LiveQueue struct {
	Durable    bool
	AutoDelete bool
	Args       map[string]any
}

// Binding routes RoutingKey on Exchange to Queue.
type Binding struct {
	Exchange   string
	Queue      string
	RoutingKey string
}

// Severity tells whether a Difference breaks the contract.
type Severity string

// Severities: Missing and Different break the contract; Extra is reported only.
const (
	Missing   Severity = "missing"
	Different Severity = "different"
	Extra     Severity = "extra"
)

// Difference is one way the live broker departs from the table.
type Difference struct {
	Severity Severity
	Object   string // exchange, queue or binding
	Name     string
	Detail   string
}

func (d Difference) String() string {
	s := fmt.Sprintf("%-9s %-8s %s", d.Severity, d.Object, d.Name)
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s
}

// Breaks reports whether any difference is Missing or Different.
func Breaks(diffs []Difference) bool {
	return slices.ContainsFunc(diffs, func(d Difference) bool { return d.Severity != Extra })
}

// Compare lists every difference between live and t: missing or different
// exchanges, queues and bindings, and (as Extra) queues and bindings under
// t's prefix that the table does not know.
func (t *Topology) Compare(live Live) []Difference {
	var diffs []Difference
	add := func(sev Severity, obj, name, format string, a ...any) {
		diffs = append(diffs, Difference{Severity: sev, Object: obj, Name: name, Detail: fmt.Sprintf(format, a...)})
	}
	for _, name := range t.exchanges {
		ex, ok := live.Exchanges[name]
		switch {
		case !ok:
			add(Missing, "exchange", name, "")
		case ex.Type != ExchangeKind:
			add(Different, "exchange", name, "type %s, want %s", ex.Type, ExchangeKind)
		case !ex.Durable || ex.AutoDelete:
			add(Different, "exchange", name, "durable=%t auto_delete=%t, want durable and not auto-delete", ex.Durable, ex.AutoDelete)
		}
	}
	want := t.Queues()
	known := make(map[string]bool, len(want))
	wantBindings := make(map[Binding]bool, len(want))
	for _, q := range want {
		known[q.Name] = true
		wantBindings[Binding{Exchange: q.Exchange, Queue: q.Name, RoutingKey: q.RoutingKey}] = true
		lq, ok := live.Queues[q.Name]
		if !ok {
			add(Missing, "queue", q.Name, "")
			continue
		}
		if !lq.Durable || lq.AutoDelete {
			add(Different, "queue", q.Name, "durable=%t auto_delete=%t, want durable and not auto-delete", lq.Durable, lq.AutoDelete)
		}
		if d := diffArgs(q.Args, lq.Args); d != "" {
			add(Different, "queue", q.Name, "%s", d)
		}
	}
	have := make(map[Binding]bool, len(live.Bindings))
	for _, b := range live.Bindings {
		have[b] = true
	}
	for _, q := range want {
		b := Binding{Exchange: q.Exchange, Queue: q.Name, RoutingKey: q.RoutingKey}
		if _, exists := live.Queues[q.Name]; exists && !have[b] { // a missing queue is reported once
			add(Missing, "binding", b.String(), "")
		}
	}
	ours := t.prefix + "."
	for _, name := range slices.Sorted(maps.Keys(live.Queues)) {
		if strings.HasPrefix(name, ours) && !known[name] {
			add(Extra, "queue", name, "not in the table")
		}
	}
	for _, b := range live.Bindings {
		if slices.Contains(t.exchanges, b.Exchange) && !wantBindings[b] {
			add(Extra, "binding", b.String(), "not in the table")
		}
	}
	return diffs
}

func (b Binding) String() string {
	return fmt.Sprintf("%s -[%s]-> %s", b.Exchange, b.RoutingKey, b.Queue)
}

// diffArgs describes how have departs from want, or returns "".
// Numbers compare by value whatever their encoding (the management API
// reports JSON numbers; AMQP tables carry typed integers).
func diffArgs(want, have map[string]any) string {
	keys := make(map[string]bool)
	for k := range want {
		keys[k] = true
	}
	for k := range have {
		keys[k] = true
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		w, wok := want[k]
		h, hok := have[k]
		switch {
		case !hok:
			parts = append(parts, fmt.Sprintf("argument %s missing, want %v", k, w))
		case !wok:
			parts = append(parts, fmt.Sprintf("argument %s=%v not in the table", k, h))
		case !sameArg(w, h):
			parts = append(parts, fmt.Sprintf("argument %s=%v, want %v", k, h, w))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func sameArg(a, b any) bool {
	fa, aok := number(a)
	fb, bok := number(b)
	if aok && bok {
		return fa == fb
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	}
	return 0, false
}
