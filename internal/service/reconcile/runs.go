package reconcile

import (
	"encoding/json"
	"log/slog"

	"github.com/eisland/isle/store"
)

// end is how a run that returned res and err ended, as job_run records it.
func end(res Result, err error) store.JobEnd {
	e := store.JobEnd{Err: err}
	if res != nil {
		e.Summary = res.String()
		if b, jerr := json.Marshal(ResultFields(res)); jerr == nil {
			e.Result = string(b)
		}
	}
	return e
}

// ResultFields is a Result as the JSON object `reconcile -once -json` prints
// and job_run keeps: its log value's attributes, groups as objects, and
// durations as Go durations ("1.5s"), as the log writes them.
func ResultFields(res Result) any { return attrValue(res.LogValue()) }

func attrValue(v slog.Value) any {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindGroup:
		m := make(map[string]any)
		for _, a := range v.Group() {
			m[a.Key] = attrValue(a.Value)
		}
		return m
	}
	return v.Any()
}
