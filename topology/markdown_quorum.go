package topology

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// writeQueueType writes doc/contract.md's "Queue type" section: the
// classic default, what quorum queues add to the table's arguments
// (derived from a quorum Topology of the default prefix, its priority
// queue kept classic), and what an operator does about quorum queues
// declared before those arguments.
func writeQueueType(b *bytes.Buffer, classic *Topology) {
	replication, _ := classic.Domain(DomainObjectReplication)
	q, err := New(Config{QueueType: QueueQuorum, ClassicQueues: []string{replication.Queue}})
	if err != nil {
		panic(err) // the default table is valid under quorum with its priority queue classic: a test holds it
	}
	code := func(s string) string { return "`" + s + "`" }
	b.WriteString(`
## Queue type

The queues above are classic queues, as the Spring backend declares them:
no ` + code("x-queue-type") + ` argument. ` + code("RABBITMQ_QUEUE_TYPE=quorum") + ` declares them as quorum
queues (` + code("x-queue-type") + `: ` + code(QueueQuorum) + `), replicated across a cluster's nodes. A quorum
queue cannot keep ` + code("x-max-priority") + ` (RabbitMQ 3.10), so start-up then refuses
the replication queue unless ` + code("RABBITMQ_CLASSIC_QUEUES") + ` keeps it classic; every
queue here is durable, neither exclusive nor auto-delete, as a quorum queue
must be.

A queue's type is one of its declare arguments, and RabbitMQ refuses a
declaration whose arguments differ from the live queue's
(` + code("PRECONDITION_FAILED") + `; a test in topology pins it). So a type change is a
change of the contract that both sides of the broker, Isle and the Spring
producers and consumers, make together: whichever declares first with the
other type makes the other's declaration fail. To migrate, either
declare new queues (a new ` + code("RABBITMQ_NAME_PREFIX") + ` on both sides, draining the
old ones), or stop both sides, let each queue empty, delete it and let the
new declarations create it with the new type. ` + code("islectl topology verify") + `
shows queues whose live arguments, type included, differ from the table.

### Delivery limit

A quorum queue counts each message's deliveries, and RabbitMQ 4 drops a
message requeued past the queue's delivery limit (20 unless declared) when
the queue has no dead-letter exchange, as the contract's main queues and
DLQs have none. So quorum queues declare their limit, and a main queue
dead-letters past it to its domain's DLQ, on its exchange. With quorum
queues, the arguments of the table above become these (a retry queue adds
only its type; the replication queue stays classic):

| queue | role | arguments under quorum |
| --- | --- | --- |
`)
	for _, qq := range q.Queues() {
		if qq.Role == RoleRetry || qq.Args["x-queue-type"] != QueueQuorum {
			continue
		}
		var args []string
		for _, k := range slices.Sorted(maps.Keys(qq.Args)) {
			args = append(args, fmt.Sprintf("`%s`: `%v`", k, qq.Args[k]))
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", qq.Name, qq.Role, strings.Join(args, ", "))
	}
	fmt.Fprintf(b, `
Why %d: Isle requeues a delivery only when it could not answer it — the
copy for the retry queue or the DLQ could not be published, or a dead
message could not be stored (each after a 2 s pause: doc/messaging.md),
the worker's shutdown outlived its timeout, or the worker died or lost its
connection (RabbitMQ 4.0–4.2 count every requeue, 4.3 no longer a nack). None of these says the
message is bad, and a retry is a new message, whose count starts at zero.
%d requeues is at least %d s of a broker refusing a domain's copies, several
times the 21–23 s a RabbitMQ node's restart took on the local cluster
(doc/faults.md), and still moves aside a message that kills its worker
every time (with the prefetch window around it: the DLQ consumer stores
them all, and `+code("islectl dlq replay")+` sends them back). The message past the limit
reaches the DLQ with `+code("x-first-death-reason")+`: `+code("delivery_limit")+`, and the DLQ consumer
stores it as any dead message. Usage stats has no DLQ: past the limit its
message is dropped, as its failures are (logged and counted, not retried).
A DLQ has nowhere to send a message, and its consumer requeues one it
cannot store until it can: its limit is %d, the largest 32-bit value
(-1, RabbitMQ 4's "no limit", makes RabbitMQ 3.10 drop the message at its
first requeue: measured here). A retry queue has no consumer: its messages
leave by their TTL. Dead-lettering is RabbitMQ's default, at most once: a
message past the limit is lost if the DLQ cannot take it at that moment.

These are declare arguments, not a policy: they come with the declaration,
so every broker and every name prefix (a test's, a second fleet's) has them
with nothing more to set up, and `+code("islectl topology verify")+` checks and
`+code("islectl topology show")+` lists them with the rest. The Spring side declares
the same arguments with quorum queues, or does not declare these queues.
Their cost is a live queue's: its arguments never change.

A quorum queue declared without them (by an older Isle, or by Spring) or
with other values makes the api's declaration fail (`+code("PRECONDITION_FAILED")+`,
`+code("inequivalent arg")+`): the api does not start, and `+code("islectl topology verify")+` names
each argument. An operator:

1. protects the live queues at once with a policy each (RabbitMQ applies a
   policy to a live queue; a queue takes one policy, so where one of yours
   matches it already, add these keys to yours). Where a queue has both,
   its arguments win over a policy's dead-letter target and the lower
   limit applies. For the default prefix:

   `+"```sh\n", DeliveryLimit, DeliveryLimit, 2*DeliveryLimit, DLQDeliveryLimit)
	for _, p := range q.QuorumPolicies() {
		def, err := json.Marshal(p.Definition)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(b, "   rabbitmqctl set_policy --apply-to queues %s '%s' '%s'\n", p.Name, p.Pattern, def)
	}
	b.WriteString("   ```\n" + `
2. declares them anew in a quiet moment: stops what publishes (the api,
   the relay, the Spring producers); lets the workers empty the main and
   retry queues (a retry queue empties into its main queue within its
   delay) and the DLQ consumers the DLQs; stops every consumer; deletes each
   queue that ` + code("islectl topology verify") + ` names (` + code("rabbitmqctl delete_queue NAME") + `; a
   quorum queue cannot be deleted "if empty", so ` + code("rabbitmqctl list_queues name messages") + `
   first); starts the api, which declares them, then the rest. Or it
   declares new names (a new ` + code("RABBITMQ_NAME_PREFIX") + ` on both sides) and drains
   the old queues.
3. deletes the policies (` + code("rabbitmqctl clear_policy NAME") + `).
`)
}
