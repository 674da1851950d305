package builder

import (
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// TestSpecKeysBoundMatchRecords: the keys SpecKeysBound predicts are those
// a build with the same images bound records (Report.Records over the nodes
// left once the bound ones are dropped), they differ from the unbound keys
// only below a bound parent, and another bound digest gives another key.
func TestSpecKeysBoundMatchRecords(t *testing.T) {
	base := &graph.Node{Key: "sweb.base.py.x86_64:latest", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch")}
	env := &graph.Node{Key: "sweb.env.py.x86_64.0123456789abcdef012345:latest", Kind: graph.KindEnv, Platform: core.AMD64,
		Parents: []string{base.Key}, Dockerfile: []byte("FROM sweb.base.py.x86_64:latest\nRUN true")}
	inst := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-1",
		Parents: []string{env.Key}, Dockerfile: []byte("FROM sweb.env.py.x86_64.0123456789abcdef012345:latest\nRUN echo")}
	all := []*graph.Node{base, env, inst}
	refA := "127.0.0.1:5000/swebench/build-cache@sha256:" + strings.Repeat("a", 64)
	refB := "127.0.0.1:5000/swebench/build-cache@sha256:" + strings.Repeat("b", 64)

	for _, tt := range []struct {
		name   string
		images map[string]string
	}{
		{"env bound", map[string]string{env.Key: refA}},
		{"env bound without :latest", map[string]string{strings.TrimSuffix(env.Key, ":latest"): refA}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := SpecKeysBound(all, tt.images)
			if err != nil {
				t.Fatal(err)
			}
			given, err := givenImages(tt.images)
			if err != nil {
				t.Fatal(err)
			}
			kept := withoutGiven(all, given)
			if len(kept) != 1 || kept[0] != inst {
				t.Fatalf("nodes left with the env bound: %d, want the instance alone", len(kept))
			}
			r := &Report{Results: []Result{{Node: inst, Status: StatusDone}}, given: given}
			recs := r.Records()
			if len(recs) != 1 || recs[0].SpecKey != keys[inst.ID()] {
				t.Fatalf("records %+v, SpecKeysBound %q", recs, keys[inst.ID()])
			}
			unbound := SpecKeys(all)
			if unbound[inst.ID()] == keys[inst.ID()] {
				t.Error("the instance's key does not change when its env is bound")
			}
			if unbound[env.ID()] != keys[env.ID()] || unbound[base.ID()] != keys[base.ID()] {
				t.Error("keys above the bound env changed")
			}
		})
	}
	a, _ := SpecKeysBound(all, map[string]string{env.Key: refA})
	b, _ := SpecKeysBound(all, map[string]string{env.Key: refB})
	if a[inst.ID()] == b[inst.ID()] {
		t.Error("two env digests give one instance key")
	}
	if _, err := SpecKeysBound(all, map[string]string{env.Key: "not a ref!"}); err == nil {
		t.Error("an invalid bound reference is accepted")
	}
}
