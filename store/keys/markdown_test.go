package keys_test

import (
	"os"
	"testing"

	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

// doc/keys.md is the registry as it is: regenerate it with the registry.
func TestKeysPageIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../doc/keys.md")
	require.NoError(t, err)
	require.Equal(t, string(keys.Markdown()), string(got), "doc/keys.md is stale: run go generate ./store/keys")
}
