// Command gendoc writes doc/keys.md from the key registry.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eisland/isle/store/keys"
)

func main() {
	out := flag.String("o", "doc/keys.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, keys.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
