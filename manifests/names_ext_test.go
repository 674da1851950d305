package manifests_test

// External test package: spectest imports dataset, which imports manifests.

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	. "github.com/swebuild/swebuild/manifests"
)

// Every upstream meta.json names its instance image under the swebench
// namespace; our per-arch names must match all of them exactly.
func TestArchRepoMatchesUpstreamNamespacedKeys(t *testing.T) {
	metas, err := filepath.Glob(filepath.Join(spectest.SharedDir(t), "upstream-v4.1.0", "instances", "*", "*", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) < 100 {
		t.Fatalf("only %d meta.json files found", len(metas))
	}
	n := Namer{Repo: "swebench"}
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			InstanceID string `json:"instance_id"`
			Arch       string `json:"arch"`
			Remote     string `json:"remote_instance_image_key_namespace_swebench"`
			Local      string `json:"instance_image_key"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := n.ArchRepo(m.Arch, m.InstanceID) + ":" + LatestTag; got != m.Remote {
			t.Errorf("%s: got %q, upstream %q", m.InstanceID, got, m.Remote)
		}
		// Without the replacement the name is upstream's local key.
		local := Namer{Repo: "x", KeepDoubleUnderscore: true}.ArchRepo(m.Arch, m.InstanceID)
		if strings.TrimPrefix(local, "x/")+":latest" != m.Local {
			t.Errorf("%s: local %q, upstream %q", m.InstanceID, local, m.Local)
		}
	}
}

// Every instance id of the full SWE-bench test split (2,294) can be named,
// and no two of them collide.
func TestRealIDsValid(t *testing.T) {
	f, err := os.Open(filepath.Join(spectest.SharedDir(t), "SWE-bench_test.instance_ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2294 {
		t.Fatalf("%d ids, want 2294", len(ids))
	}
	for _, id := range ids {
		if err := ValidateID(id); err != nil {
			t.Error(err)
		}
	}
	if err := (Namer{}).CheckCollisions(ids); err != nil {
		t.Error(err)
	}
}
