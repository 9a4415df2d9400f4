// Package validate checks Isle's Kubernetes manifests without a cluster:
// it builds each kustomization with kustomize's own library (krusty),
// decodes every object strictly into its Kubernetes type (KEDA's kinds
// into the mirror types of keda.go), and checks what the API server
// would not: selectors that select, references to objects that exist,
// probes on declared ports, queues of the wire contract (doc/contract.md)
// and settings the binaries read (doc/config.md).
//
// It is a module of its own so that kustomize and k8s.io/api stay out of
// the Isle module's dependency graph; `go test ./...` here runs it over
// deploy/k8s.
package validate
