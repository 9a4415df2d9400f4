package topology

//go:generate go run ./gendoc -o ../doc/contract.md

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Markdown renders the wire contract with the default prefix and the
// default retry policies: the page doc/contract.md is (go generate
// ./topology writes it; a test holds it current).
func Markdown() []byte {
	t, err := New(Config{})
	if err != nil {
		panic(err) // the default table is valid: a test holds it
	}
	var b bytes.Buffer
	b.WriteString(`# The wire contract

<!-- Generated from topology/table.go by "go generate ./topology"; do not edit. -->

What Isle and the Spring producers and consumers agree on over RabbitMQ,
with the default name prefix ` + "`" + DefaultPrefix + "`" + ` (` + "`RABBITMQ_NAME_PREFIX`" + `) and
the default retry policies. Every exchange is a durable ` + "`" + ExchangeKind + "`" + ` exchange and
every queue is durable; messages are JSON (` + "`application/json`" + `), persistent,
with a ` + "`__TypeId__`" + ` header naming the Java record. doc/messaging.md
describes how a message moves: publishing, the retry pattern, dead messages.

## Domains

| domain | record | ` + "`__TypeId__`" + ` | exchange | main queue (routing key) |
| --- | --- | --- | --- | --- |
`)
	for _, d := range t.domains {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | `%s` | `%s` (`%s`) |\n", d.Name, d.Message, d.TypeID, d.Exchange, d.Queue, d.RoutingKey)
	}
	b.WriteString(`
## Retries and dead messages

A handler's failure sends a copy to the retry queue with the retry header
one higher; the retry queue's TTL dead-letters it back to the main routing
key. Past the maximum, or at once for a message that can never succeed, the
copy goes to the DLQ, whose consumer stores it in the domain's table,
indexed by the named body field. A copy keeps the message's ` + "`message_id`" + `; a
copy of a message that had none carries one Isle gave that delivery (the
body's hash and a part of its own), so whoever handles the copy knows it
for the same message. The policy's variables override the defaults
(doc/config.md).

| domain | retry queue | delay | max retries | retry header | DLQ | table (indexed by) | variables |
| --- | --- | --- | --- | --- | --- | --- | --- |
`)
	for _, d := range t.domains {
		if !d.HasRetry() {
			fmt.Fprintf(&b, "| `%s` | none: a failure is logged and counted | | | | | | |\n", d.Name)
			continue
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %d | `%s` | `%s` | `%s` (`%s`) | `%s_MAX_RETRIES`, `%s_RETRY_DELAY_MS` |\n",
			d.Name, d.RetryQueue, d.Retry.Delay, d.Retry.MaxRetries, d.RetryHeader, d.DLQ, d.DLQTable, d.DLQSubject, d.EnvPrefix, d.EnvPrefix)
	}
	b.WriteString(`
## Queues and their arguments

| queue | role | exchange | routing key | arguments |
| --- | --- | --- | --- | --- |
`)
	for _, q := range t.Queues() {
		var args []string
		for _, k := range slices.Sorted(maps.Keys(q.Args)) {
			args = append(args, fmt.Sprintf("`%s`: `%v`", k, q.Args[k]))
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | `%s` | %s |\n", q.Name, q.Role, q.Exchange, q.RoutingKey, strings.Join(args, ", "))
	}
	writeQueueType(&b, t)
	b.WriteString(`
## Records

Each message's JSON fields, in order (Isle's additions to the Spring records
are marked; a consumer ignores fields it does not know).
`)
	for _, s := range table {
		fmt.Fprintf(&b, "\n`%s` (%s):\n\n", s.record.Record(), s.name)
		rt := reflect.Indirect(reflect.ValueOf(s.record)).Type()
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			note := ""
			if isleField[s.record.Record()+"."+name] {
				note = " — Isle's"
			}
			if n := fieldNote[s.record.Record()+"."+name]; n != "" {
				note += " — " + n
			}
			fmt.Fprintf(&b, "- `%s` %s%s\n", name, javaKind(f.Type), note)
		}
	}
	return b.Bytes()
}

// isleField marks the fields Isle adds to the Spring backend's records (idempotency
// keys and references the Spring records lack).
var isleField = map[string]bool{
	"AgentBillingDeductMessage.deductionId": true, "AgentBillingDeductMessage.pendingRef": true,
	"AgentBillingDeductMessage.requestHash": true, "AgentUsageStatsMessage.requestId": true,
	"PaymentNotifyMessage.amountFen": true, "PaymentNotifyMessage.currency": true,
}

// fieldNote says what a consumer needs of a field, where a grant depends
// on it.
var fieldNote = map[string]string{
	"PaymentNotifyMessage.amountFen": "with currency, what a paid message grants: the order's amount, or nothing; " +
		"a paid message without both is granted what rawBody proves",
	"PaymentNotifyMessage.rawBody": "the gateway's callback; a paid message without amountFen and currency is granted " +
		"only what this callback proves, verified with the gateways' keys (doc/payments.md)",
}

// javaKind names a field's JSON value as the Java side sees it.
func javaKind(t reflect.Type) string {
	nullable := t.Kind() == reflect.Pointer
	if nullable {
		t = t.Elem()
	}
	kind := t.Name()
	switch t.Kind() {
	case reflect.String:
		kind = "string"
	case reflect.Int32:
		kind = "int"
	case reflect.Int64:
		kind = "long"
	case reflect.Bool:
		kind = "boolean"
	}
	if nullable {
		return kind + " or null"
	}
	return kind
}
