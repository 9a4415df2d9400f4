package config

import (
	"bytes"
	"fmt"
	"strings"
)

// Documented is one variable with the binaries that read it.
type Documented struct {
	Var
	Binaries []string
}

// Variables lists every variable any binary reads, in first-read order, as
// the loaders themselves record it.
func Variables() []Documented {
	var out []Documented
	index := make(map[string]int)
	for _, b := range binaries {
		l := newLoader(nil)
		b.load(l)
		for _, v := range l.seen {
			i, ok := index[v.Name]
			if !ok {
				i = len(out)
				index[v.Name] = i
				out = append(out, Documented{Var: v})
			}
			if bs := out[i].Binaries; len(bs) == 0 || bs[len(bs)-1] != b.name {
				out[i].Binaries = append(bs, b.name)
			}
		}
	}
	return out
}

// Markdown renders doc/config.md.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration

Every Isle binary reads its settings from environment variables, parsed in one
place (` + "`cmd/internal/config`" + `). Names follow the customer's documents: the Redis
variables of doc/keys.md, the RabbitMQ connection, and the Spring
properties written as variables (` + "`email.notify-max-retries`" + ` is
` + "`EMAIL_NOTIFY_MAX_RETRIES`" + `). Unset or empty variables take the default, which
works against the local services; only the operations addresses (` + "`*_OPS_ADDR`" + `)
tell the two apart: unset takes the default, empty serves none. A binary reports
every bad variable at once and does not start.

This file is generated from the loaders by ` + "`go generate ./cmd/internal/config`" + `;
a test fails when it is out of date.

| Variable | Default | Read by | Meaning |
| --- | --- | --- | --- |
`)
	for _, v := range Variables() {
		def := "(empty)"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, strings.Join(v.Binaries, ", "), strings.ReplaceAll(v.Doc, "|", `\|`))
	}
	return b.Bytes()
}
