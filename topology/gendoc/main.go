// Command gendoc writes doc/contract.md from the topology table.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eisland/isle/topology"
)

func main() {
	out := flag.String("o", "doc/contract.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, topology.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
