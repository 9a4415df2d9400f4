// Package luascript loads the Lua scripts a package embeds (go:embed needs
// the files in that package) as go-redis Scripts. A Script's Run sends
// EVALSHA and falls back to EVAL when the server does not hold the script
// (NOSCRIPT: after a restart or a SCRIPT FLUSH), so callers never load
// scripts themselves. The package knows nothing of Isle.
package luascript

import (
	"io/fs"
	"path"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Dir is a directory of Lua scripts in a file system, as a package embeds it.
type Dir struct {
	fsys fs.FS
	dir  string
}

// In is the directory dir of fsys.
func In(fsys fs.FS, dir string) Dir { return Dir{fsys: fsys, dir: dir} }

// Load returns the script name, with the libraries libs in front of it as
// one source: a library's local functions are the script's own, and the
// script keeps its KEYS/ARGV contract at the top of its file. Names are
// relative to the directory. A missing file panics: the files are embedded
// at build time, so it is a build defect that any test of the package
// catches when it loads.
func (d Dir) Load(name string, libs ...string) *redis.Script {
	var src []byte
	for _, f := range append(libs[:len(libs):len(libs)], name) {
		b, err := fs.ReadFile(d.fsys, path.Join(d.dir, f))
		if err != nil {
			panic("luascript: missing embedded script: " + err.Error())
		}
		src = append(src, b...)
	}
	sc := redis.NewScript(string(src))
	names.Store(sc.Hash(), name)
	return sc
}

// names maps the SHA-1 of each loaded script to its file name.
var names sync.Map

// Name is the file name of the loaded script whose SHA-1 is sha (as
// EVALSHA sends it), or "" for one Load did not load.
func Name(sha string) string {
	n, _ := names.Load(sha)
	s, _ := n.(string)
	return s
}
