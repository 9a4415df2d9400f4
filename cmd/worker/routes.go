package main

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/messaging"
)

// routes returns every route this build can run, by handler name: the main
// consumer of each domain whose handler exists, and each domain's DLQ
// consumer ("<domain>-dlq").
func routes(deps *app.Deps, flow *messaging.Flow, cfg config.WorkerSection, log *slog.Logger) map[string]messaging.Route {
	out := map[string]messaging.Route{}
	for _, d := range deps.Topology.Domains() {
		if d.HasRetry() {
			name := d.Name + "-dlq"
			out[name] = messaging.Route{
				Name: name, Queue: d.DLQ, Concurrency: 1,
				Handle: flow.DLQ(d, handlers.NewDeadLetters(deps.DB, d, log.With("handler", name)).Handle),
			}
		}
	}
	return out
}

// selectRoutes picks the routes -handlers names: "all", "dlq" (every DLQ
// consumer), domain names and "<domain>-dlq".
func selectRoutes(available map[string]messaging.Route, spec string) ([]messaging.Route, error) {
	names := make([]string, 0, len(available))
	for n := range available {
		names = append(names, n)
	}
	sort.Strings(names)
	var picked []string
	for _, want := range strings.Split(spec, ",") {
		switch want = strings.TrimSpace(want); want {
		case "":
		case "all":
			picked = append(picked, names...)
		case "dlq":
			for _, n := range names {
				if strings.HasSuffix(n, "-dlq") {
					picked = append(picked, n)
				}
			}
		default:
			if _, ok := available[want]; !ok {
				return nil, fmt.Errorf("-handlers: no handler %q in this build; available: all, dlq, %s", want, strings.Join(names, ", "))
			}
			picked = append(picked, want)
		}
	}
	slices.Sort(picked)
	picked = slices.Compact(picked)
	if len(picked) == 0 {
		return nil, fmt.Errorf("-handlers %q selects nothing", spec)
	}
	out := make([]messaging.Route, len(picked))
	for i, n := range picked {
		out[i] = available[n]
	}
	return out, nil
}
