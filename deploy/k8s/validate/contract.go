package validate

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Contract is what the manifests are checked against: the queues of the
// wire contract and the variables the binaries read.
type Contract struct {
	// MainQueue and DLQ map each domain (the worker's -handlers names)
	// to its queues; a domain without retries has no DLQ.
	MainQueue map[string]string
	DLQ       map[string]string
	// ReadBy maps each variable to the binaries that read it.
	ReadBy map[string][]string
}

// cell is one `code` cell of a Markdown table row.
var cell = regexp.MustCompile("^`([^`]+)`")

// rows returns the cells of the table rows under the heading named title.
func rows(md []byte, title string) [][]string {
	var (
		out [][]string
		in  bool
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.TrimLeft(line, "# ") == title
			continue
		}
		if !in || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "| "), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		out = append(out, cells)
	}
	return out
}

// code is the text of a cell's first `code` span, or "".
func code(c string) string {
	if m := cell.FindStringSubmatch(c); m != nil {
		return m[1]
	}
	return ""
}

// ParseContract reads doc/contract.md (generated from topology/table.go)
// and doc/config.md (generated from cmd/internal/config).
func ParseContract(contractMD, configMD []byte) (Contract, error) {
	c := Contract{MainQueue: map[string]string{}, DLQ: map[string]string{}, ReadBy: map[string][]string{}}
	for _, r := range rows(contractMD, "Domains") {
		if len(r) == 5 && code(r[0]) != "" {
			c.MainQueue[code(r[0])] = code(r[4])
		}
	}
	for _, r := range rows(contractMD, "Retries and dead messages") {
		if len(r) >= 6 && code(r[0]) != "" && code(r[5]) != "" {
			c.DLQ[code(r[0])] = code(r[5])
		}
	}
	for _, r := range rows(configMD, "Configuration") {
		if len(r) == 4 && code(r[0]) != "" {
			c.ReadBy[code(r[0])] = strings.Split(r[2], ", ")
		}
	}
	switch {
	case len(c.MainQueue) == 0 || len(c.DLQ) == 0:
		return c, fmt.Errorf("doc/contract.md: no domains or DLQs found (%d, %d)", len(c.MainQueue), len(c.DLQ))
	case len(c.ReadBy) == 0:
		return c, fmt.Errorf("doc/config.md: no variables found")
	}
	return c, nil
}

// Queues returns every queue a consumer can read: main queues and DLQs.
func (c Contract) Queues() []string {
	var out []string
	for _, q := range c.MainQueue {
		out = append(out, q)
	}
	for _, q := range c.DLQ {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// Consumed returns the queues a worker run with -handlers spec reads:
// "all", "dlq" (every DLQ), domain names and "<domain>-dlq", as
// cmd/worker selects them; an unknown name is an error.
func (c Contract) Consumed(spec string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(spec, ",") {
		h = strings.TrimSpace(h)
		domain, dead := strings.CutSuffix(h, "-dlq")
		switch {
		case h == "all":
			out = append(out, c.Queues()...)
		case h == "dlq":
			for _, q := range c.DLQ {
				out = append(out, q)
			}
		case dead && c.DLQ[domain] != "":
			out = append(out, c.DLQ[domain])
		case !dead && c.MainQueue[h] != "":
			out = append(out, c.MainQueue[h])
		default:
			return nil, fmt.Errorf("-handlers %q: no handler %q", spec, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
