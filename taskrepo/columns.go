package taskrepo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxYAMLDepth bounds the nesting of a task.yaml value turned into JSON.
const maxYAMLDepth = 100

// yamlJSON is the JSON text of a task.yaml value: a record's other column
// (core.Instance.Extra) or image_assets. Mappings keep their key order,
// integers and floats written as JSON numbers keep their text (1.50 stays
// 1.50), other scalars (a timestamp, .inf) become strings as written.
func yamlJSON(n *yaml.Node, depth int) (string, error) {
	var b strings.Builder
	if err := writeYAMLJSON(&b, n, depth); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeYAMLJSON(b *strings.Builder, n *yaml.Node, depth int) error {
	if depth > maxYAMLDepth {
		return errors.New("nested too deeply")
	}
	switch n.Kind {
	case yaml.AliasNode:
		return writeYAMLJSON(b, n.Alias, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errors.New("not one value")
		}
		return writeYAMLJSON(b, n.Content[0], depth+1)
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeYAMLJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a mapping key that is not a scalar", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k.Value))
			b.WriteByte(':')
			if err := writeYAMLJSON(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	switch n.Tag {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return err
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int", "!!float":
		if json.Valid([]byte(n.Value)) && n.Value != "" && (n.Value[0] == '-' || '0' <= n.Value[0] && n.Value[0] <= '9') {
			b.WriteString(n.Value)
			return nil
		}
		var v float64
		if n.Tag == "!!int" && n.Decode(&v) == nil {
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64)) // 0x1f, 1_000
			return nil
		}
		b.WriteString(jsonString(n.Value)) // .inf, .nan: no JSON number
	default:
		b.WriteString(jsonString(n.Value))
	}
	return nil
}

// jsonString is s as a JSON string (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
