package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/swebuild/swebuild/builder/spec/pyrepr"
)

// DockerSpec is one entry of a spec's docker_specs dict.
type DockerSpec struct {
	Key string
	// Value is the entry's JSON value (a string for every template
	// variable; run_args is an object).
	Value json.RawMessage
}

// DockerSpecs is a spec's docker_specs dict in upstream's key order, which
// matters: the base and env image keys hash Python's str() of the dict. In
// data/specs.json it is a list of [key, value] pairs. The zero value is the
// empty dict (upstream's `docker_specs != {}` is false).
type DockerSpecs struct {
	entries []DockerSpec
	repr    string
}

// NewDockerSpecs builds the dict from entries in order; a later key
// replaces an earlier one in place, as in a Python dict.
func NewDockerSpecs(entries ...DockerSpec) (DockerSpecs, error) {
	var d DockerSpecs
	for _, e := range entries {
		if err := d.set(e.Key, e.Value); err != nil {
			return DockerSpecs{}, err
		}
	}
	return d, d.updateRepr()
}

func (d *DockerSpecs) set(key string, v json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return fmt.Errorf("docker_specs.%s: %w", key, err)
	}
	for i := range d.entries {
		if d.entries[i].Key == key {
			d.entries[i].Value = b.Bytes()
			return nil
		}
	}
	d.entries = append(d.entries, DockerSpec{Key: key, Value: b.Bytes()})
	return nil
}

// With returns a copy with key set to the string value (pins use it).
func (d DockerSpecs) With(key, value string) (DockerSpecs, error) {
	c := DockerSpecs{entries: append([]DockerSpec(nil), d.entries...)}
	v, _ := json.Marshal(value)
	if err := c.set(key, v); err != nil {
		return DockerSpecs{}, err
	}
	return c, c.updateRepr()
}

func (d *DockerSpecs) updateRepr() error {
	if len(d.entries) == 0 {
		d.repr = "{}"
		return nil
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range d.entries {
		if i > 0 {
			b.WriteString(", ")
		}
		pyrepr.AppendString(&b, e.Key)
		b.WriteString(": ")
		if err := appendJSONRepr(&b, json.NewDecoder(bytes.NewReader(e.Value))); err != nil {
			return fmt.Errorf("docker_specs.%s: %w", e.Key, err)
		}
	}
	b.WriteByte('}')
	d.repr = b.String()
	return nil
}

// Len is the number of entries.
func (d DockerSpecs) Len() int { return len(d.entries) }

// Entries returns the entries in order.
func (d DockerSpecs) Entries() []DockerSpec { return append([]DockerSpec(nil), d.entries...) }

// Repr is Python's str() of the dict, e.g. {'node_version': '20', '_variant': 'js_2'}.
func (d DockerSpecs) Repr() string {
	if d.repr == "" {
		return "{}"
	}
	return d.repr
}

// Lookup returns what str.format substitutes for {key}: a string value
// itself, any other value's Python str().
func (d DockerSpecs) Lookup(key string) (string, bool) {
	for _, e := range d.entries {
		if e.Key != key {
			continue
		}
		if len(e.Value) > 0 && e.Value[0] == '"' {
			var s string
			if err := json.Unmarshal(e.Value, &s); err == nil {
				return s, true
			}
		}
		var b strings.Builder
		if err := appendJSONRepr(&b, json.NewDecoder(bytes.NewReader(e.Value))); err != nil {
			return "", false
		}
		return b.String(), true
	}
	return "", false
}

// Variant is the _variant entry ("js_2"), "" when absent.
func (d DockerSpecs) Variant() string {
	v, _ := d.Lookup("_variant")
	return v
}

// MarshalJSON writes [[key, value], ...].
func (d DockerSpecs) MarshalJSON() ([]byte, error) {
	pairs := make([][2]json.RawMessage, len(d.entries))
	for i, e := range d.entries {
		k, err := json.Marshal(e.Key)
		if err != nil {
			return nil, err
		}
		pairs[i] = [2]json.RawMessage{k, e.Value}
	}
	return json.Marshal(pairs)
}

// UnmarshalJSON reads [[key, value], ...] or, for hand-written spec files,
// an object (its keys in file order).
func (d *DockerSpecs) UnmarshalJSON(b []byte) error {
	*d = DockerSpecs{}
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(t))
		if _, err := dec.Token(); err != nil {
			return err
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if err := d.set(tok.(string), v); err != nil {
				return err
			}
		}
		return d.updateRepr()
	}
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(b, &pairs); err != nil {
		return fmt.Errorf("docker_specs: want [[key, value], ...]: %w", err)
	}
	for _, p := range pairs {
		var k string
		if err := json.Unmarshal(p[0], &k); err != nil {
			return fmt.Errorf("docker_specs: key: %w", err)
		}
		if err := d.set(k, p[1]); err != nil {
			return err
		}
	}
	return d.updateRepr()
}

// appendJSONRepr writes Python's repr of the next JSON value of dec
// (objects keep their key order). Only what a JSON dump of a Python dict
// holds is accepted: strings, integers, true/false/null, lists, dicts.
func appendJSONRepr(b *strings.Builder, dec *json.Decoder) error {
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("missing value")
		}
		return err
	}
	return appendToken(b, dec, tok)
}

func appendToken(b *strings.Builder, dec *json.Decoder, tok json.Token) error {
	switch v := tok.(type) {
	case string:
		pyrepr.AppendString(b, v)
	case json.Number:
		if _, err := v.Int64(); err != nil {
			return fmt.Errorf("number %s: only integers are supported", v)
		}
		b.WriteString(v.String())
	case bool:
		if v {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case nil:
		b.WriteString("None")
	case json.Delim:
		closing := byte(']')
		if v == '{' {
			closing = '}'
		}
		b.WriteByte(byte(v))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			t, err := dec.Token()
			if err != nil {
				return err
			}
			if v == '{' {
				pyrepr.AppendString(b, t.(string))
				b.WriteString(": ")
				if t, err = dec.Token(); err != nil {
					return err
				}
			}
			if err := appendToken(b, dec, t); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteByte(closing)
	}
	return nil
}

// IsZero reports whether the dict is empty (json omitzero).
func (d DockerSpecs) IsZero() bool { return len(d.entries) == 0 }
