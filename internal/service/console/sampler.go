package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store"
)

// sample is the broker's queue statistics and the fleet's health at one
// moment.
type sample struct {
	at       time.Time
	queues   map[string]rabbitadmin.QueueStats
	queueErr error // why queues is nil
	health   []health
}

// health is one dependency's or binary's state.
type health struct {
	Name   string
	State  string // ok, failing, off (a binary serving no health endpoint)
	Detail string
	Took   time.Duration
}

// probeTimeout bounds each health check of a sample.
const probeTimeout = 2 * time.Second

// sampler keeps the samples of the last window, oldest first.
type sampler struct {
	c      *Console
	names  []string // the topology's queues
	client *http.Client
	taking sync.Mutex // one sample taken at a time
	mu     sync.Mutex
	ring   []sample
}

func newSampler(c *Console) *sampler {
	s := &sampler{c: c, client: &http.Client{Timeout: probeTimeout}}
	for _, q := range c.backends.Topology.Queues() {
		s.names = append(s.names, q.Name)
	}
	return s
}

// take samples now and keeps the sample.
func (s *sampler) take(ctx context.Context) sample {
	s.taking.Lock()
	defer s.taking.Unlock()
	smp := s.measure(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := int(s.c.cfg.SampleWindow/s.c.cfg.SampleInterval) + 1
	s.ring = append(s.ring, smp)
	if len(s.ring) > keep {
		s.ring = append(s.ring[:0:0], s.ring[len(s.ring)-keep:]...)
	}
	return smp
}

// current returns the newest sample, taking one first when there is none
// younger than two intervals (Run is not running, or is late), and the
// samples of the window, oldest first.
func (s *sampler) current(ctx context.Context) (sample, []sample) {
	s.mu.Lock()
	fresh := len(s.ring) > 0 && s.c.now().Sub(s.ring[len(s.ring)-1].at) < 2*s.c.cfg.SampleInterval
	s.mu.Unlock()
	if !fresh {
		s.take(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ring := append([]sample(nil), s.ring...)
	return ring[len(ring)-1], ring
}

// measure reads the broker's queue statistics and checks every dependency
// and binary, all at once.
func (s *sampler) measure(ctx context.Context) sample {
	d := s.c.backends
	checks := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"MySQL", func(ctx context.Context) error { return store.PingMySQL(ctx, d.DB) }},
		{"Redis", d.Redis.Ping},
	}
	if d.Publisher != nil {
		checks = append(checks, struct {
			name string
			fn   func(context.Context) error
		}{"RabbitMQ (AMQP)", d.Publisher.Ping})
	}
	smp := sample{at: s.c.now(), health: make([]health, len(checks)+1+len(d.Probes))}
	var wg sync.WaitGroup
	run := func(i int, name string, fn func(context.Context) (string, error)) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			began := time.Now()
			detail, err := fn(ctx)
			h := health{Name: name, State: "ok", Detail: detail, Took: time.Since(began)}
			if err != nil {
				h.State, h.Detail = "failing", err.Error()
			}
			smp.health[i] = h
		})
	}
	for i, ch := range checks {
		run(i, ch.name, func(ctx context.Context) (string, error) { return "", ch.fn(ctx) })
	}
	run(len(checks), "RabbitMQ (management API)", func(ctx context.Context) (string, error) {
		all, err := d.Broker.Queues(ctx)
		smp.queueErr = err
		if err == nil {
			smp.queues = make(map[string]rabbitadmin.QueueStats, len(s.names))
			for _, name := range s.names { // the topology's only: a shared broker holds others
				if q, ok := all[name]; ok {
					smp.queues[name] = q
				}
			}
		}
		return "", err
	})
	for i, p := range d.Probes {
		i := len(checks) + 1 + i
		if p.URL == "" {
			smp.health[i] = health{Name: p.Name, State: "off", Detail: "no health address configured"}
			continue
		}
		run(i, p.Name, func(ctx context.Context) (string, error) { return s.probe(ctx, p.URL) })
	}
	wg.Wait()
	return smp
}

// probe GETs a binary's /healthz: 200 is healthy; anything else says why not.
func (s *sampler) probe(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", url, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s %s", url, resp.Status, clip(200, string(body)))
	}
	return url, nil
}

// unwrapURLError drops the method and URL net/http puts before the cause.
func unwrapURLError(err error) error {
	if s := err.Error(); strings.Contains(s, ": ") {
		if i := strings.LastIndex(s, ": "); i > 0 {
			return fmt.Errorf("%s", s[i+2:])
		}
	}
	return err
}
