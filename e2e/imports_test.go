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

// The import graph stays a DAG a reader can draw from memory (STYLE.md):
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

	allowed := map[string][]string{
		"topology":             {},
		"store/keys":           {},
		"store":                {"store/keys"},
		"internal/correlation": {},
		"internal/messaging":   {"topology", "internal/correlation"},
		"handlers":             {"internal/messaging", "store", "store/keys", "topology"},
		"internal/billing":     {"store"},
	}
	for pkg, deps := range imports {
		if want, ok := allowed[pkg]; ok {
			for _, d := range deps {
				require.True(t, slices.Contains(want, d), "%s imports %s", pkg, d)
			}
		}
		if !strings.HasPrefix(pkg, "cmd/") {
			for _, d := range deps {
				require.False(t, strings.HasPrefix(d, "cmd/"), "%s imports the wiring %s", pkg, d)
			}
		}
	}
	require.Contains(t, imports, "store", "the graph was read")
}
