package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/eisland/isle/topology"
)

// BrokerUser is the RabbitMQ user of one binary with the least permissions
// it needs on its vhost (doc/deploy.md, "RabbitMQ users"): regular
// expressions over the prefixed exchange and queue names, as
// `rabbitmqctl set_permissions` takes them. Every expression is anchored
// and names only the contract's exchanges and queues under the prefix.
type BrokerUser struct {
	Binary    string // api, worker, relay, reconcile, islectl
	Name      string // the user: isle-<binary>
	Configure string // declare (and delete) exchanges and queues
	Write     string // publish to exchanges; bind queues; dead-letter to exchanges
	Read      string // consume from queues; bind from exchanges; declare a queue with a dead-letter exchange
	Tags      string // "management" where the binary reads the management API
}

// nothing is the permission that matches no name.
const nothing = "^$"

// BrokerUsers are the users of Isle's binaries for the name prefix (the
// contract's names are derived from it as the topology derives them):
//
//   - api: declares the topology at start and on every reconnection
//     (configure everything under the prefix; write the exchanges it
//     publishes to and the queues it binds; read the exchanges it binds
//     and the retry queues, which are declared with a dead-letter
//     exchange); publishes to every domain (the console replays dead
//     messages of any), and reads queue statistics for the console
//     (management).
//   - worker: only checks that the topology exists; consumes every main
//     queue and DLQ and publishes retry and DLQ copies to the domains'
//     exchanges. No configure, no retry queue.
//   - relay: publishes the outbox, which may hold any domain's messages.
//   - reconcile: publishes replication replays and backfill to the
//     replication exchange, and reads queue depths through the
//     management API (balance-sync).
//   - islectl: what the api may (topology apply declares; dlq replay
//     publishes to any domain), and reads the bindings and queues
//     (topology verify, queues) through the management API.
func BrokerUsers(prefix string) ([]BrokerUser, error) {
	tp, err := topology.New(topology.Config{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	p := regexp.QuoteMeta(tp.Prefix())
	var consumed, lasts []string // main queues and DLQs; the segment before a main queue's ".queue"
	for _, q := range tp.Queues() {
		if q.Role == topology.RoleRetry {
			continue
		}
		consumed = append(consumed, q.Name)
		if q.Role == topology.RoleMain {
			parts := strings.Split(q.Name, ".")
			lasts = append(lasts, regexp.QuoteMeta(parts[len(parts)-2]))
		}
	}
	slices.Sort(lasts)
	replication, ok := tp.Domain(topology.DomainObjectReplication)
	if !ok {
		return nil, fmt.Errorf("config: topology %s has no %s domain", prefix, topology.DomainObjectReplication)
	}
	var (
		all       = "^" + p + `\.`
		exchanges = "^" + p + `\..+\.exchange$`
		declarer  = "^" + p + `\..+\.(exchange|retry\.queue)$`
		// Main queues end in ".dispatch.queue", ".process.queue", ...;
		// retry queues in ".retry.queue"; DLQs in ".dlq".
		mainAndDLQ = "^" + p + `\..+\.(dlq|(` + strings.Join(slices.Compact(lasts), "|") + `)\.queue)$`
		replays    = "^" + regexp.QuoteMeta(replication.Exchange) + "$"
	)
	if err := matchesExactly(tp, mainAndDLQ, consumed); err != nil {
		return nil, err // a queue name the expression was not made for: a test holds the table
	}
	return []BrokerUser{
		{Binary: "api", Name: "isle-api", Configure: all, Write: all, Read: declarer, Tags: "management"},
		{Binary: "worker", Name: "isle-worker", Configure: nothing, Write: exchanges, Read: mainAndDLQ},
		{Binary: "relay", Name: "isle-relay", Configure: nothing, Write: exchanges, Read: nothing},
		{Binary: "reconcile", Name: "isle-reconcile", Configure: nothing, Write: replays, Read: nothing, Tags: "management"},
		{Binary: "islectl", Name: "isle-islectl", Configure: all, Write: all, Read: declarer, Tags: "management"},
	}, nil
}

// matchesExactly checks that expr matches the names of want and no other
// exchange or queue of tp.
func matchesExactly(tp *topology.Topology, expr string, want []string) error {
	re, err := regexp.Compile(expr)
	if err != nil {
		return err
	}
	names := tp.Exchanges()
	for _, q := range tp.Queues() {
		names = append(names, q.Name)
	}
	for _, n := range names {
		if re.MatchString(n) != slices.Contains(want, n) {
			return fmt.Errorf("config: %s matches %s wrongly", expr, n)
		}
	}
	return nil
}

// Rabbitmqctl is the commands that make u on vhost: add_user (with
// PASSWORD to replace), set_permissions and, when it has tags,
// set_user_tags. Each expression is single-quoted for a POSIX shell.
func (u BrokerUser) Rabbitmqctl(vhost string) []string {
	out := []string{
		fmt.Sprintf("rabbitmqctl add_user %s PASSWORD", u.Name),
		fmt.Sprintf("rabbitmqctl set_permissions -p %s %s '%s' '%s' '%s'", vhost, u.Name, u.Configure, u.Write, u.Read),
	}
	if u.Tags != "" {
		out = append(out, fmt.Sprintf("rabbitmqctl set_user_tags %s %s", u.Name, u.Tags))
	}
	return out
}
