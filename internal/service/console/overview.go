package console

import (
	"html/template"
	"net/http"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/topology"
)

// overviewData is the overview page: the health of each dependency and
// binary, and every queue of the topology by domain.
type overviewData struct {
	Sampled    time.Time
	Health     []health
	QueueErr   string
	WaitingErr string
	Domains    []domainRow
	Window     time.Duration
	Interval   time.Duration
}

// domainRow is one domain: its queues and its stored dead messages.
type domainRow struct {
	Name    string
	HasDLQ  bool
	Waiting int64 // stored dead messages not replayed
	Queues  []queueRow
}

// queueRow is one queue as the broker last counted it.
type queueRow struct {
	Name  string
	Role  topology.Role
	Stats rabbitadmin.QueueStats
	Found bool // the broker has the queue
	Alert bool // a retry queue or DLQ holding messages
	Spark template.HTML
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) (rendered, error) {
	ctx := r.Context()
	now, ring := c.samples.current(ctx)
	d := overviewData{Sampled: now.at, Health: now.health, Window: c.cfg.SampleWindow, Interval: c.cfg.SampleInterval}
	if now.queueErr != nil {
		d.QueueErr = now.queueErr.Error()
	}
	waiting, err := c.dead.Waiting(ctx)
	if err != nil {
		d.WaitingErr = err.Error()
	}
	byDomain := map[string]*domainRow{}
	for _, dom := range c.backends.Topology.Domains() {
		d.Domains = append(d.Domains, domainRow{Name: dom.Name, HasDLQ: dom.HasRetry(), Waiting: waiting[dom.Name]})
	}
	for i := range d.Domains {
		byDomain[d.Domains[i].Name] = &d.Domains[i]
	}
	for _, q := range c.backends.Topology.Queues() {
		st, found := now.queues[q.Name]
		row := queueRow{Name: q.Name, Role: q.Role, Stats: st, Found: found}
		row.Alert = q.Role != topology.RoleMain && st.Messages() > 0
		row.Spark = sparkline(depths(ring, q.Name), c.cfg.SampleWindow)
		dr := byDomain[q.Domain]
		dr.Queues = append(dr.Queues, row)
	}
	return rendered{file: "overview.html", title: "Overview", nav: "overview", data: d}, nil
}

// depths are a queue's message counts in the samples, oldest first, with
// -1 where a sample has none.
func depths(ring []sample, queue string) []float64 {
	out := make([]float64, len(ring))
	for i, s := range ring {
		st, ok := s.queues[queue]
		out[i] = -1
		if ok && st.Counted {
			out[i] = float64(st.Messages())
		}
	}
	return out
}
