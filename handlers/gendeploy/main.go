// Command gendeploy writes what the Kubernetes base and doc/deploy.md say
// of the worker kinds, from handlers.WorkerKinds and the topology: a
// manifest per kind in deploy/k8s/base/workers, their lines in the base's
// kustomization and the table of worker kinds in doc/deploy.md. Run it
// from the repository's root (go generate ./handlers does).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	files, err := render(*root)
	if err == nil {
		err = write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendeploy:", err)
		os.Exit(1)
	}
}

// write puts files under root, and removes the worker manifests no kind
// makes any more.
func write(root string, files map[string][]byte) error {
	old, err := filepath.Glob(filepath.Join(root, workersDir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range old {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return err
		}
		if _, ok := files[rel]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
