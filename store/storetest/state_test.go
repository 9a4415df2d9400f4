package storetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Diff names the files written, added and deleted under the directories
// of the States, and nothing else.
func TestStateDiffNamesTheFilesThatChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write("a", "1")
	write("sub/b", "2")
	write("c", "3")
	before := State{Files: fileState(t, []string{dir})}
	require.Len(t, before.Files, 3)
	require.Empty(t, before.Diff(State{Files: fileState(t, []string{dir})}, nil), "nothing changed")

	write("a", "1") // the same content again
	write("sub/b", "changed")
	write("d", "new")
	require.NoError(t, os.Remove(filepath.Join(dir, "c")))
	after := State{Files: fileState(t, []string{dir})}
	require.Equal(t, []string{
		fmt.Sprintf("file %s: deleted", filepath.Join(dir, "c")),
		fmt.Sprintf("file %s: written", filepath.Join(dir, "d")),
		fmt.Sprintf("file %s: written", filepath.Join(dir, "sub/b")),
	}, before.Diff(after, nil))
}
