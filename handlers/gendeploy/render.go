package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/topology"
)

const (
	workersDir    = "deploy/k8s/base/workers"
	kustomization = "deploy/k8s/base/kustomization.yaml"
	deployDoc     = "doc/deploy.md"
	generated     = "Generated from handlers.WorkerKinds by go generate ./handlers: edit those, not this."
)

//go:embed worker.yaml.tmpl
var workerYAML string

var workerTmpl = template.Must(template.New("worker").Parse(workerYAML))

// kind is a worker kind as its manifest is written.
type kind struct {
	handlers.WorkerKind
	Generated   string
	About       []string
	HandlersArg string
	Queues      []string // the queues KEDA scales it on
}

// render returns every file gendeploy writes, by its path under root,
// reading the kustomization and doc/deploy.md as they are to replace their
// generated lines.
func render(root string) (map[string][]byte, error) {
	tp, err := topology.New(topology.Config{})
	if err != nil {
		return nil, err
	}
	kinds, err := kindsOf(tp)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var resources, rows []string
	for _, k := range kinds {
		var b bytes.Buffer
		if err := workerTmpl.Execute(&b, k); err != nil {
			return nil, err
		}
		name := workersDir + "/" + k.Name + ".yaml"
		files[name] = b.Bytes()
		resources = append(resources, "  - workers/"+k.Name+".yaml")
		rows = append(rows, docRow(tp, k))
	}
	for path, lines := range map[string][]string{kustomization: resources, deployDoc: rows} {
		old, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		isOurs := func(line string) bool { return strings.HasPrefix(line, "  - workers/") }
		if path == deployDoc {
			isOurs = func(line string) bool { return strings.HasPrefix(line, "| `isle-worker-") }
		}
		b, err := replaceLines(old, isOurs, lines)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		files[path] = b
	}
	return files, nil
}

// kindsOf checks handlers.WorkerKinds against the consumers and the
// topology: every consumer in exactly one kind, the dead-letter consumers
// in the last, and returns the kinds with their queues.
func kindsOf(tp *topology.Topology) ([]kind, error) {
	consumed := map[string]bool{}
	for _, c := range handlers.Consumers {
		consumed[c.Domain] = true
	}
	placed := map[string]string{}
	var out []kind
	for _, wk := range handlers.WorkerKinds {
		k := kind{WorkerKind: wk, Generated: generated, About: strings.Split(wk.About, "\n"), HandlersArg: strings.Join(wk.Handlers, ",")}
		for _, h := range wk.Handlers {
			if other, ok := placed[h]; ok {
				return nil, fmt.Errorf("worker kinds %s and %s both run %s", other, wk.Name, h)
			}
			placed[h] = wk.Name
			if h == handlers.DLQHandlers {
				for _, d := range tp.Domains() {
					if d.HasRetry() {
						k.Queues = append(k.Queues, d.DLQ)
					}
				}
				continue
			}
			d, ok := tp.Domain(h)
			if !ok || !consumed[h] {
				return nil, fmt.Errorf("worker kind %s runs %s, which is no consumer of handlers.Consumers", wk.Name, h)
			}
			k.Queues = append(k.Queues, d.Queue)
		}
		out = append(out, k)
	}
	for _, c := range handlers.Consumers {
		if _, ok := placed[c.Domain]; !ok {
			return nil, fmt.Errorf("no worker kind runs %s: add it to handlers.WorkerKinds", c.Domain)
		}
	}
	if _, ok := placed[handlers.DLQHandlers]; !ok {
		return nil, fmt.Errorf("no worker kind runs the dead-letter consumers (%s)", handlers.DLQHandlers)
	}
	return out, nil
}

// docRow is k's row in doc/deploy.md's table of worker kinds.
func docRow(tp *topology.Topology, k kind) string {
	queues := "every DLQ"
	if k.HandlersArg != handlers.DLQHandlers {
		var q []string
		for _, name := range k.Queues {
			q = append(q, "`"+strings.TrimPrefix(name, tp.Prefix()+".")+"`")
		}
		queues = strings.Join(q, ", ")
	}
	return fmt.Sprintf("| `isle-worker-%s` | `%s` | %s | %d | %d |", k.Name, k.HandlersArg, queues, k.PerPod, k.MaxPods)
}

// replaceLines replaces the one run of consecutive lines of old for which
// ours is true with lines.
func replaceLines(old []byte, ours func(string) bool, lines []string) ([]byte, error) {
	in := strings.Split(string(old), "\n")
	first, last := -1, -1
	for i, line := range in {
		if !ours(line) {
			continue
		}
		if first < 0 {
			first = i
		} else if last != i-1 {
			return nil, fmt.Errorf("the generated lines are not one run (lines %d and %d)", last+1, i+1)
		}
		last = i
	}
	if first < 0 {
		return nil, fmt.Errorf("no generated lines to replace")
	}
	out := append(append(append([]string(nil), in[:first]...), lines...), in[last+1:]...)
	return []byte(strings.Join(out, "\n")), nil
}
