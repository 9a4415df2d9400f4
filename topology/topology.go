package topology

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"
)

// RetryPolicy is how often and how late a domain's failed messages are retried.
type RetryPolicy struct {
	MaxRetries int           // copies sent to the retry queue before the DLQ; 0 = straight to the DLQ
	Delay      time.Duration // the retry queue's x-message-ttl
}

// Config selects the prefix and overrides the defaults. Its zero value is the contract as the Spring backend has it.
type Config struct {
	Prefix  string                 // default DefaultPrefix
	Retry   map[string]RetryPolicy // by domain name; a missing domain keeps the default policy
	TypeIDs map[string]string      // __TypeId__ by record name; a missing one gets TypeIDPackage + "." + record
	// TypeIDPackage is the Java package of the records (default DefaultTypeIDPackage).
	TypeIDPackage string
	// QueueType is the type of every queue: QueueClassic (default, "") or
	// QueueQuorum. ClassicQueues names queues (prefixed) that stay classic
	// under QueueQuorum: New refuses a quorum queue that cannot keep its
	// arguments unless it is listed there.
	QueueType     string
	ClassicQueues []string
}

// DefaultTypeIDPackage is the Java package assumed for the Spring backend's records.
const DefaultTypeIDPackage = "com.eisland.server.mq.message"

// Domain is one message domain of the wire contract, with its names resolved.
type Domain struct {
	Name        string // "email", "payment-notify", ...
	Exchange    string // eisland.email.verify.exchange
	Queue       string // main queue
	RoutingKey  string
	RetryQueue  string // "" for usage stats
	RetryKey    string
	DLQ         string // "" for usage stats
	DLQKey      string
	Retry       RetryPolicy
	RetryHeader string // x-email-retry-count; "" for usage stats
	MaxPriority int    // 10 for object replication, else 0
	DLQTable    string // MySQL table of dead messages; "" for usage stats
	DLQSubject  string // the body field a dead message is indexed by ("email", "outTradeNo", ...)
	EnvPrefix   string // the retry policy's variables: <EnvPrefix>_MAX_RETRIES, <EnvPrefix>_RETRY_DELAY_MS
	Message     string // Java record name, e.g. EmailCodeDispatchMessage (the message type's Record())
	TypeID      string // __TypeId__ header value
}

// HasRetry reports whether failed messages of the domain go through a retry queue and a DLQ.
func (d Domain) HasRetry() bool { return d.RetryQueue != "" }

// Topology is the resolved wire contract for one prefix.
type Topology struct {
	prefix    string
	exchanges []string
	domains   []Domain
	queueType string          // QueueClassic or QueueQuorum
	classic   map[string]bool // queues that stay classic under QueueQuorum
}

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// New resolves the table for cfg. It reports every invalid setting at once.
func New(cfg Config) (*Topology, error) {
	prefix := cmp.Or(cfg.Prefix, DefaultPrefix)
	var errs []error
	if !prefixPattern.MatchString(prefix) {
		errs = append(errs, fmt.Errorf("topology: prefix %q: want 1-64 letters, digits, '-' or '_'", prefix))
	}
	for name := range cfg.Retry {
		if _, ok := SeedRetry(name); !ok {
			errs = append(errs, fmt.Errorf("topology: retry policy for %q: no such domain with retries", name))
		}
	}
	t := &Topology{prefix: prefix}
	for _, e := range exchanges() {
		t.exchanges = append(t.exchanges, t.name(e))
	}
	pkg := cmp.Or(cfg.TypeIDPackage, DefaultTypeIDPackage)
	for _, s := range table {
		d := Domain{
			Name:        s.name,
			Exchange:    t.name(s.exchange),
			Queue:       t.name(s.queue),
			RoutingKey:  t.name(s.routingKey),
			RetryQueue:  t.name(s.retryQueue),
			RetryKey:    t.name(s.retryKey),
			DLQ:         t.name(s.dlq),
			DLQKey:      t.name(s.dlqKey),
			RetryHeader: s.retryHeader,
			MaxPriority: s.maxPriority,
			DLQTable:    s.dlqTable,
			DLQSubject:  s.dlqSubject,
			EnvPrefix:   s.envPrefix,
			Message:     s.record.Record(),
		}
		d.TypeID = cmp.Or(cfg.TypeIDs[d.Message], pkg+"."+d.Message)
		if s.retryQueue != "" {
			d.Retry = RetryPolicy{MaxRetries: s.maxRetries, Delay: s.retryDelay}
			if p, ok := cfg.Retry[s.name]; ok {
				d.Retry = p
			}
			errs = append(errs, validatePolicy(s.name, d.Retry)...)
		}
		t.domains = append(t.domains, d)
	}
	errs = append(errs, t.setQueueType(cfg)...)
	for rec := range cfg.TypeIDs {
		if t.domainByMessage(rec) == nil {
			errs = append(errs, fmt.Errorf("topology: type id for %q: no such message", rec))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

func validatePolicy(domain string, p RetryPolicy) []error {
	var errs []error
	if p.MaxRetries < 0 || p.MaxRetries > 1000 {
		errs = append(errs, fmt.Errorf("topology: %s: max retries %d: want 0..1000", domain, p.MaxRetries))
	}
	if p.Delay < time.Millisecond || p.Delay.Milliseconds() > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("topology: %s: retry delay %s: want 1ms..%dms", domain, p.Delay, math.MaxInt32))
	}
	return errs
}

// name prefixes a table name; the empty name stays empty.
func (t *Topology) name(suffix string) string {
	if suffix == "" {
		return ""
	}
	return t.prefix + "." + suffix
}

// Prefix is the first segment of every name.
func (t *Topology) Prefix() string { return t.prefix }

// Exchanges lists the exchange names, all durable and of type direct.
func (t *Topology) Exchanges() []string { return append([]string(nil), t.exchanges...) }

// Domains lists the domains in table order.
func (t *Topology) Domains() []Domain { return append([]Domain(nil), t.domains...) }

// Domain returns the domain called name.
func (t *Topology) Domain(name string) (Domain, bool) {
	for _, d := range t.domains {
		if d.Name == name {
			return d, true
		}
	}
	return Domain{}, false
}

// DomainByQueue returns the domain that owns queue (main, retry or DLQ).
func (t *Topology) DomainByQueue(queue string) (Domain, bool) {
	for _, d := range t.domains {
		if queue != "" && (d.Queue == queue || d.RetryQueue == queue || d.DLQ == queue) {
			return d, true
		}
	}
	return Domain{}, false
}

func (t *Topology) domainByMessage(record string) *Domain {
	for i := range t.domains {
		if t.domains[i].Message == record {
			return &t.domains[i]
		}
	}
	return nil
}
