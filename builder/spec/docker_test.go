package spec

import (
	"encoding/json"
	"testing"
)

// Expected strings are CPython 3.11's str() of the same dicts.
func TestDockerSpecsRepr(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`[["node_version","21.6.2"],["pnpm_version","7.9.0"],["run_args",{"cap_add":["SYS_ADMIN"]}]]`,
			`{'node_version': '21.6.2', 'pnpm_version': '7.9.0', 'run_args': {'cap_add': ['SYS_ADMIN']}}`},
		{`{"node_version": "20", "_variant": "js_2"}`, `{'node_version': '20', '_variant': 'js_2'}`},
		{`{"b": true, "a": null, "c": 3, "d": [], "e": {}}`, `{'b': True, 'a': None, 'c': 3, 'd': [], 'e': {}}`},
		{`[]`, `{}`},
	} {
		var d DockerSpecs
		if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := d.Repr(); got != tc.want {
			t.Errorf("%s: Repr %s, want %s", tc.in, got, tc.want)
		}
		// Round trip through data/specs.json's pair form keeps the order.
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back DockerSpecs
		if err := json.Unmarshal(raw, &back); err != nil || back.Repr() != tc.want {
			t.Errorf("%s: round trip %s gives %s (%v)", tc.in, raw, back.Repr(), err)
		}
	}
	var d DockerSpecs
	if err := json.Unmarshal([]byte(`{"x": 1.5}`), &d); err == nil {
		t.Error("a float was accepted (its Python str() is not the JSON text)")
	}
	d, _ = NewDockerSpecs(DockerSpec{Key: "node_version", Value: json.RawMessage(`"20"`)}, DockerSpec{Key: "_variant", Value: json.RawMessage(`"js_2"`)})
	if v, _ := d.Lookup("node_version"); v != "20" || d.Variant() != "js_2" {
		t.Errorf("Lookup %q, Variant %q", v, d.Variant())
	}
	e, err := d.With("node_version", "22")
	if err != nil || e.Repr() != `{'node_version': '22', '_variant': 'js_2'}` || d.Repr() != `{'node_version': '20', '_variant': 'js_2'}` {
		t.Errorf("With: %s (original %s, %v)", e.Repr(), d.Repr(), err)
	}
}
