//go:generate go run ./gendeploy -root ..

package handlers

import "github.com/eisland/isle/topology"

// A WorkerKind is a Deployment of workers in Kubernetes that runs some of
// the consumers, scaled by KEDA on the length of their queues. The
// manifests of deploy/k8s/base/workers, their lines in the kustomization
// and doc/deploy.md's table of worker kinds are generated from
// WorkerKinds and the topology (go generate ./handlers); a test fails
// while they are stale.
type WorkerKind struct {
	Name  string // the Deployment is isle-worker-<Name>
	About string // what the kind runs and why it scales as it does: the manifest's opening comment
	// Handlers are the consumers it runs (-handlers): domains of Consumers,
	// or DLQHandlers for every dead-letter consumer.
	Handlers []string
	PerPod   int // KEDA adds a pod per PerPod messages ready in its queues
	MaxPods  int
	// The container's requests and limits.
	CPU, Memory       string
	CPUMax, MemoryMax string
	// PaymentKeys: it reads the optional Secret isle-payments, the gateways'
	// keys that verify a callback (doc/payments.md).
	PaymentKeys bool
}

// DLQHandlers is the -handlers name of every dead-letter consumer.
const DLQHandlers = "dlq"

// WorkerKinds are the worker Deployments of the Kubernetes base: each
// consumer of Consumers is in exactly one, and the last runs every DLQ's.
var WorkerKinds = []WorkerKind{
	{Name: "billing", Handlers: []string{topology.DomainAgentBilling}, PerPod: 1000, MaxPods: 10,
		CPU: "100m", Memory: "64Mi", CPUMax: "1", MemoryMax: "256Mi",
		About: "Agent billing deductions: the batching consumer writes up to WORKER_BATCH\n" +
			"deductions per MySQL transaction, so a long queue is cheap to drain."},
	{Name: "usage-stats", Handlers: []string{topology.DomainAgentUsageStats}, PerPod: 1000, MaxPods: 5,
		CPU: "50m", Memory: "64Mi", CPUMax: "500m", MemoryMax: "256Mi",
		About: "Agent usage statistics: a batching consumer without retries (a failure is\n" +
			"counted and logged)."},
	{Name: "email", Handlers: []string{topology.DomainEmail}, PerPod: 50, MaxPods: 5,
		CPU: "50m", Memory: "64Mi", CPUMax: "500m", MemoryMax: "256Mi",
		About: "Verification code mails: each message is one SMTP conversation, and a\n" +
			"code lives 5 minutes, so a short queue already asks for more pods."},
	{Name: "payments", Handlers: []string{topology.DomainPaymentNotify, topology.DomainPaymentReceipt}, PerPod: 50, MaxPods: 5,
		CPU: "50m", Memory: "64Mi", CPUMax: "500m", MemoryMax: "256Mi", PaymentKeys: true,
		About: "Payments: gateway notifications (grant the benefit, write the receipt to\n" +
			"the outbox) and receipt mails; KEDA scales on the longer of the two queues."},
	{Name: "objects", Handlers: []string{topology.DomainObjectReplication, topology.DomainIdentityMaterial}, PerPod: 20, MaxPods: 10,
		CPU: "100m", Memory: "128Mi", CPUMax: "1", MemoryMax: "512Mi",
		About: "Object replication and identity material: streams objects between stores\n" +
			"(8 MiB buffers), so fewer messages per pod and more memory."},
	{Name: "game", Handlers: []string{topology.DomainMiniGameScore}, PerPod: 500, MaxPods: 5,
		CPU: "50m", Memory: "64Mi", CPUMax: "500m", MemoryMax: "256Mi",
		About: "Mini game scores: upserts keeping the best score and the leaderboards."},
	{Name: "dlq", Handlers: []string{DLQHandlers}, PerPod: 100, MaxPods: 3,
		CPU: "50m", Memory: "64Mi", CPUMax: "500m", MemoryMax: "256Mi",
		About: "Every DLQ consumer (-handlers dlq): each dead message is stored in its\n" +
			"MySQL table for islectl dlq list/replay; one pod is plenty, a burst of\n" +
			"dead messages adds more."},
}
