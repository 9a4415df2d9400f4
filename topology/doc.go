// Package topology is Isle's wire contract as data: the exchanges, queues,
// arguments, routing keys, retry policies and message types of the RabbitMQ
// architecture (doc/contract.md). Declaring, verifying, the router wiring, the
// `islectl topology` output and the docs all derive from the one table in
// table.go; nothing else in Isle spells a queue name.
//
// Names carry a configurable prefix (default "eisland") so that tests and
// side-by-side fleets can isolate themselves; nothing else about a name is
// configurable. Retry delays and limits default to the Spring backend's values and can
// be overridden per domain.
//
// The message types are the Java records of the Spring backend, one file per domain.
// Decode and Encode are their JSON codec, the wire format Spring AMQP's
// Jackson converter reads and writes (codec.go); Validate on each record says
// what a consumer may rely on.
//
// The Spring documents' header counts 21 queues and 9 record types while their tables
// define 22 queues and 8 records; Isle follows the tables.
package topology
