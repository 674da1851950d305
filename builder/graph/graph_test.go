package graph

import (
	"encoding/json"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// TestPlanJSON: a node marshals as `swebuild plan --format json` has always
// shown it (kind, key, parent, platform, instances), whatever is built
// from it; a base has no parent field, and instances is always there.
func TestPlanJSON(t *testing.T) {
	for _, c := range []struct {
		n    Node
		want string
	}{
		{Node{Kind: KindEnv, Key: "sweb.env.py.arm64.abc:latest", Parents: []string{"sweb.base.py.arm64:latest"}, Platform: core.ARM64,
			Instances: []string{"a__b-1", "a__b-2"}, Dockerfile: []byte("FROM x"), Context: map[string][]byte{"setup_env.sh": nil}, X86Only: true},
			`{"kind":"env","key":"sweb.env.py.arm64.abc:latest","parent":"sweb.base.py.arm64:latest","platform":"linux/arm64","instances":["a__b-1","a__b-2"]}`},
		{Node{Kind: KindBase, Key: "sweb.base.py.x86_64:latest", Platform: core.AMD64},
			`{"kind":"base","key":"sweb.base.py.x86_64:latest","platform":"linux/amd64","instances":null}`},
	} {
		b, err := json.Marshal(&c.n)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("json:\n %s\nwant\n %s", b, c.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	n := Node{Key: "sweb.eval.arm64.a__b-1:latest", Platform: core.ARM64, Parents: []string{"e", "f"}}
	if n.ID() != "sweb.eval.arm64.a__b-1:latest@linux/arm64" || n.Arch() != "arm64" || n.Parent() != "e" {
		t.Errorf("ID %q, Arch %q, Parent %q", n.ID(), n.Arch(), n.Parent())
	}
	if (&Node{}).Parent() != "" {
		t.Error("a node without parents has one")
	}
}
