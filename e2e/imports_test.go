package e2e_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/eisland/isle/"

// The import graph stays a DAG a reader can draw from memory:
// store is a leaf, topology stands alone, producers and consumers meet only
// in topology, and nothing imports a binary's wiring.
func TestImportGraph(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json", "../...")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	imports := map[string][]string{}
	dec := json.NewDecoder(out)
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				imports[name] = append(imports[name], strings.TrimPrefix(imp, module))
			}
		}
		if _, ok := imports[name]; !ok {
			imports[name] = nil
		}
	}
	require.NoError(t, cmd.Wait())

	// Every package is listed: a new one must say where it stands. The
	// layers, from the leaves: the contract (topology) and the key registry
	// stand alone; store holds the data; messaging moves messages; the
	// domain services and consumers use those; the API never reaches into
	// the consumers (handlers), nor they into the API; cmd/ wires it all.
	allowed := map[string][]string{
		"internal/browsertest": {}, // the browser tests' chromium, for tests only
		"topology":             {},
		"topology/gendoc":      {"topology"},
		"game":                 {}, // the domains' rules: pure Go, no SQL, no Redis (README, "Adding a domain")
		"order":                {"topology"},
		"store/keys":           {},
		"store/keys/gendoc":    {"store/keys"},
		"internal/correlation": {},
		"internal/tracing":     {}, // OpenTelemetry's setup and Isle's tracer
		// Points of the code a test can wait for; off, and free, in production.
		"internal/testsignal":  {},
		"internal/groupcommit": {"internal/testsignal", "internal/tracing"},
		"internal/sqltx":       {},
		"internal/luascript":   {}, // a package's embedded Lua scripts: go-redis only
		"internal/lease":       {"internal/luascript"},
		"internal/ratelimit":   {"internal/luascript"},
		"internal/objstore":    {},
		"internal/images":      {},
		// Gateway callback verification: the standard library and the contract.
		"internal/paynotify":   {"topology"},
		"internal/mail":        {},
		"store":                {"game", "order", "store/keys", "internal/groupcommit", "internal/lease", "internal/luascript", "internal/sqltx", "internal/tracing", "topology"},
		"internal/keyclean":    {"store", "store/keys"},
		"store/storetest":      {"internal/keyclean", "store", "store/keys", "topology"},
		"internal/messaging":   {"topology", "internal/correlation", "internal/testsignal", "internal/tracing"},
		"internal/rabbitadmin": {"topology"},
		"internal/billing":     {"store"},
		"internal/dlq":         {"internal/messaging", "store", "topology"},
		"internal/relay":       {"internal/messaging", "internal/testsignal", "store", "topology"},
		"handlers":             {"game", "order", "internal/mail", "internal/messaging", "internal/objstore", "internal/tracing", "store", "store/keys", "topology"},
		"internal/httpapi": {"game", "order", "internal/billing", "internal/correlation", "internal/images", "internal/mail", "internal/messaging", "internal/objstore", "internal/paynotify", "internal/ratelimit",
			"store", "store/keys", "topology"},
		"internal/reconcile": {"internal/dlq", "internal/lease", "internal/messaging", "internal/rabbitadmin", "store", "store/keys", "topology"},
		// The operator console reads what the operator's CLI and the reconciler read; the API and islectl mount it.
		"internal/console": {"internal/dlq", "internal/messaging", "internal/rabbitadmin", "internal/reconcile", "store", "topology"},
		"cmd/internal/config": {"internal/console", "internal/httpapi", "internal/keyclean", "internal/messaging", "internal/objstore", "internal/paynotify", "internal/reconcile",
			"internal/relay", "store", "store/keys", "topology"},
		"cmd/internal/config/gendoc": {"cmd/internal/config"},
		"cmd/internal/app": {"cmd/internal/config", "internal/console", "internal/correlation", "internal/dlq", "internal/keyclean", "internal/mail", "internal/messaging", "internal/tracing",
			"internal/objstore", "internal/rabbitadmin", "internal/reconcile", "store", "topology"},
		"cmd/api":    {"cmd/internal/app", "cmd/internal/config", "internal/billing", "internal/httpapi", "internal/messaging", "internal/paynotify"},
		"cmd/worker": {"cmd/internal/app", "cmd/internal/config", "handlers", "internal/mail", "internal/messaging", "internal/objstore", "store"},
		"cmd/relay":  {"cmd/internal/app", "cmd/internal/config", "internal/messaging", "internal/relay"},
		"cmd/reconcile": {"cmd/internal/app", "cmd/internal/config", "internal/dlq", "internal/lease", "internal/messaging", "internal/rabbitadmin",
			"internal/reconcile", "store", "store/keys", "topology"},
		// The bench drives a fleet from outside, as a client and an operator do.
		"internal/bench": {"internal/httpapi", "internal/keyclean", "store", "store/keys", "topology"},
		// islectl pay simulate signs callbacks as the gateways do (paynotify's test signers).
		"cmd/islectl": {"game", "order", "cmd/internal/app", "cmd/internal/config", "internal/bench", "internal/dlq", "internal/httpapi", "internal/messaging", "internal/paynotify",
			"internal/rabbitadmin", "store", "store/keys", "topology"},
		"e2e": {},
	}
	for pkg, deps := range imports {
		want, ok := allowed[pkg]
		require.True(t, ok, "package %s is not in the layering: add it to allowed, with what it may import", pkg)
		for _, d := range deps {
			require.True(t, slices.Contains(want, d), "%s imports %s", pkg, d)
		}
	}
	require.Contains(t, imports, "store", "the graph was read")
}

// Payment callbacks are verified with the standard library, not a payment
// SDK (doc/payments.md): internal/paynotify imports nothing outside it but the
// contract.
func TestPaynotifyImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "../internal/paynotify").Output()
	require.NoError(t, err)
	imports := strings.Fields(string(out))
	require.Contains(t, imports, "crypto/rsa", "the imports were read")
	for _, imp := range imports {
		first, _, _ := strings.Cut(imp, "/")
		require.True(t, imp == module+"topology" || !strings.Contains(first, "."), "internal/paynotify imports %s", imp)
	}
}
