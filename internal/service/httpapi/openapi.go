package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// openapi.yaml is the API's description, kept by hand beside the routes; a
// test checks that it is valid OpenAPI 3 and lists exactly the routes served.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON is openapi.yaml as served at /openapi.json, keys in the
// document's own order.
var openAPIJSON = mustJSON(openAPIYAML)

func mustJSON(src []byte) []byte {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml: %v", err)) // a build defect, caught by every test
	}
	var b bytes.Buffer
	if err := writeNode(&b, &doc); err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml: %v", err))
	}
	return b.Bytes()
}

// writeNode writes a YAML node as JSON, keeping the order of mapping keys.
func writeNode(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeNode(b, n.Content[0])
	case yaml.AliasNode:
		return writeNode(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(n.Content[i].Value)
			b.Write(key)
			b.WriteByte(':')
			if err := writeNode(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeNode(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		if f, ok := v.(float64); ok {
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			return nil
		}
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(out)
	default:
		return fmt.Errorf("line %d: unsupported YAML node", n.Line)
	}
	return nil
}
