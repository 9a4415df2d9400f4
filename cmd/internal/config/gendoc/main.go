// Command gendoc writes doc/config.md from the configuration loaders.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eisland/isle/cmd/internal/config"
)

func main() {
	out := flag.String("o", "doc/config.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, config.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
