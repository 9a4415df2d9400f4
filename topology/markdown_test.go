package topology_test

import (
	"os"
	"testing"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// doc/contract.md is the table as it is: regenerate it with the table.
func TestContractPageIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../doc/contract.md")
	require.NoError(t, err)
	require.Equal(t, string(topology.Markdown()), string(got), "doc/contract.md is stale: run go generate ./topology")
}
