package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

const root = "../.."

// The worker manifests, their kustomization lines and doc/deploy.md's
// table are what handlers.WorkerKinds and the topology make: regenerate
// them with the registry.
func TestWorkerManifestsAreCurrent(t *testing.T) {
	t.Parallel()
	files, err := render(root)
	require.NoError(t, err)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is stale: run go generate ./handlers", name)
	}
	onDisk, err := filepath.Glob(filepath.Join(root, workersDir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, onDisk, len(handlers.WorkerKinds), "a manifest in %s that no worker kind makes: run go generate ./handlers", workersDir)
}

// A consumer no worker kind runs, or one run by two, stops the generator.
func TestEveryConsumerHasOneWorkerKind(t *testing.T) {
	saved := slices.Clone(handlers.WorkerKinds)
	t.Cleanup(func() { handlers.WorkerKinds = saved })

	handlers.WorkerKinds = slices.DeleteFunc(slices.Clone(saved), func(k handlers.WorkerKind) bool { return k.Name == "game" })
	_, err := render(root)
	require.ErrorContains(t, err, "no worker kind runs mini-game-score")

	handlers.WorkerKinds = append(slices.Clone(saved), handlers.WorkerKind{Name: "twice", Handlers: []string{"email"}})
	_, err = render(root)
	require.ErrorContains(t, err, "worker kinds email and twice both run email")

	handlers.WorkerKinds = append(slices.Clone(saved), handlers.WorkerKind{Name: "nothing", Handlers: []string{"no-such-domain"}})
	_, err = render(root)
	require.ErrorContains(t, err, "runs no-such-domain, which is no consumer")
}

// A kind's manifest says what it runs and scales on.
func TestAWorkerManifestNamesItsQueues(t *testing.T) {
	t.Parallel()
	files, err := render(root)
	require.NoError(t, err)
	payments := string(files[workersDir+"/payments.yaml"])
	require.Contains(t, payments, `args: ["-handlers", "payment-notify,payment-receipt"]`)
	require.Contains(t, payments, "queueName: eisland.payment.notify.process.queue")
	require.Contains(t, payments, "name: isle-payments")
	require.NotContains(t, string(files[workersDir+"/email.yaml"]), "isle-payments")
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	dlqs := 0
	for _, d := range tp.Domains() {
		if d.HasRetry() {
			dlqs++
			require.Contains(t, string(files[workersDir+"/dlq.yaml"]), "queueName: "+d.DLQ+"\n")
		}
	}
	require.Equal(t, dlqs, strings.Count(string(files[workersDir+"/dlq.yaml"]), "queueName: "), "every DLQ")
}
