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

// The import graph stays a DAG a reader can draw from memory, in four
// layers the tree shows (layerOf): the contract and the domains' rules; the
// kit (internal/kit), generic pieces that know nothing of Isle's data; store,
// the data; and the application above them (handlers, internal/service,
// cmd). A package imports its own layer or the ones below. Inside the
// layers, producers and consumers meet only in topology, and nothing
// imports a binary's wiring.
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
		"internal/kit/browsertest": {}, // the browser tests' chromium, for tests only
		"topology":                 {},
		"topology/gendoc":          {"topology"},
		"game":                     {}, // the domains' rules: pure Go, no SQL, no Redis (README, "Adding a domain")
		"order":                    {"topology"},
		"store/keys":               {},
		"store/keys/gendoc":        {"store/keys"},
		"internal/kit/correlation": {},
		"internal/kit/tracing":     {}, // OpenTelemetry's setup and Isle's tracer
		// Points of the code a test can wait for; off, and free, in production.
		"internal/kit/testsignal":  {},
		"internal/kit/groupcommit": {"internal/kit/testsignal", "internal/kit/tracing"},
		"internal/kit/sqltx":       {},
		"internal/kit/luascript":   {}, // a package's embedded Lua scripts: go-redis only
		"internal/kit/lease":       {"internal/kit/luascript"},
		"internal/kit/ratelimit":   {"internal/kit/luascript"},
		"internal/kit/objstore":    {},
		"internal/kit/images":      {},
		// Gateway callback verification: the standard library and the contract.
		"internal/kit/paynotify":   {"topology"},
		"internal/kit/mail":        {},
		"store":                    {"game", "order", "store/keys", "internal/kit/groupcommit", "internal/kit/lease", "internal/kit/luascript", "internal/kit/sqltx", "internal/kit/tracing", "topology"},
		"store/keyclean":           {"store", "store/keys"},
		"store/storetest":          {"store/keyclean", "store", "store/keys", "topology"},
		"internal/kit/messaging":   {"topology", "internal/kit/correlation", "internal/kit/testsignal", "internal/kit/tracing"},
		"internal/kit/rabbitadmin": {"topology"},
		"internal/service/billing": {"store"},
		"internal/service/dlq":     {"internal/kit/messaging", "store", "topology"},
		"internal/service/relay":   {"internal/kit/messaging", "internal/kit/testsignal", "store", "topology"},
		"handlers":                 {"game", "order", "internal/kit/mail", "internal/kit/messaging", "internal/kit/objstore", "internal/kit/tracing", "store", "store/keys", "topology"},
		"internal/service/httpapi": {"game", "order", "internal/service/billing", "internal/kit/correlation", "internal/kit/images", "internal/kit/mail", "internal/kit/messaging", "internal/kit/objstore", "internal/kit/paynotify", "internal/kit/ratelimit",
			"store", "store/keys", "topology"},
		"internal/service/reconcile": {"internal/service/dlq", "internal/kit/lease", "internal/kit/messaging", "internal/kit/rabbitadmin", "store", "store/keys", "topology"},
		// The operator console reads what the operator's CLI and the reconciler read; the API and islectl mount it.
		"internal/service/console": {"internal/service/dlq", "internal/kit/messaging", "internal/kit/rabbitadmin", "internal/service/reconcile", "store", "topology"},
		"cmd/internal/config": {"internal/service/console", "internal/service/httpapi", "store/keyclean", "internal/kit/messaging", "internal/kit/objstore", "internal/kit/paynotify", "internal/service/reconcile",
			"internal/service/relay", "store", "store/keys", "topology"},
		"cmd/internal/config/gendoc": {"cmd/internal/config"},
		"handlers/gendeploy":         {"handlers", "topology"},
		"cmd/internal/app": {"cmd/internal/config", "internal/service/console", "internal/kit/correlation", "internal/service/dlq", "store/keyclean", "internal/kit/mail", "internal/kit/messaging", "internal/kit/tracing",
			"internal/kit/objstore", "internal/kit/rabbitadmin", "internal/service/reconcile", "store", "topology"},
		"cmd/api":    {"cmd/internal/app", "cmd/internal/config", "internal/service/billing", "internal/service/httpapi", "internal/kit/messaging", "internal/kit/paynotify"},
		"cmd/worker": {"cmd/internal/app", "cmd/internal/config", "handlers", "internal/kit/mail", "internal/kit/messaging", "internal/kit/objstore", "store"},
		"cmd/relay":  {"cmd/internal/app", "cmd/internal/config", "internal/kit/messaging", "internal/service/relay"},
		"cmd/reconcile": {"cmd/internal/app", "cmd/internal/config", "internal/service/dlq", "internal/kit/lease", "internal/kit/messaging", "internal/kit/rabbitadmin",
			"internal/service/reconcile", "store", "store/keys", "topology"},
		// The bench drives a fleet from outside, as a client and an operator do.
		"cmd/islectl/internal/bench": {"internal/service/httpapi", "store/keyclean", "store", "store/keys", "topology"},
		// islectl pay simulate signs callbacks as the gateways do (paynotify's test signers).
		"cmd/islectl": {"game", "order", "cmd/internal/app", "cmd/internal/config", "cmd/islectl/internal/bench", "internal/service/dlq", "internal/service/httpapi", "internal/kit/messaging", "internal/kit/paynotify",
			"internal/kit/rabbitadmin", "store", "store/keys", "topology"},
		"e2e": {},
	}
	for pkg, deps := range imports {
		want, ok := allowed[pkg]
		require.True(t, ok, "package %s is not in the layering: add it to allowed, with what it may import", pkg)
		for _, d := range deps {
			require.True(t, slices.Contains(want, d), "%s imports %s", pkg, d)
			require.LessOrEqual(t, layerOf(d), layerOf(pkg), "%s (%s) imports %s (%s), a layer above it",
				pkg, layers[layerOf(pkg)], d, layers[layerOf(d)])
		}
	}
	require.Contains(t, imports, "store", "the graph was read")
	for _, kit := range []string{"internal/kit/messaging", "internal/kit/groupcommit", "internal/kit/sqltx"} {
		require.Equal(t, 1, layerOf(kit), "%s is the kit's", kit)
	}
}

// layers are the import graph's layers, from the bottom.
var layers = []string{"contract and rules", "kit", "store", "application", "end-to-end tests"}

// layerOf is the layer of pkg, a path inside the module, by the folder it
// is in.
func layerOf(pkg string) int {
	under := func(dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
	switch {
	case under("topology") || under("store/keys") || under("game") || under("order"):
		return 0
	case under("internal/kit"):
		return 1
	case under("store"):
		return 2
	case under("e2e"):
		return 4
	default: // handlers, internal/service, cmd
		return 3
	}
}

// Payment callbacks are verified with the standard library, not a payment
// SDK (doc/payments.md): internal/kit/paynotify imports nothing outside it but the
// contract.
func TestPaynotifyImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "../internal/kit/paynotify").Output()
	require.NoError(t, err)
	imports := strings.Fields(string(out))
	require.Contains(t, imports, "crypto/rsa", "the imports were read")
	for _, imp := range imports {
		first, _, _ := strings.Cut(imp, "/")
		require.True(t, imp == module+"topology" || !strings.Contains(first, "."), "internal/kit/paynotify imports %s", imp)
	}
}
