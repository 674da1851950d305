package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/plan"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/sbom"
)

// TestAddInventory plans the fixture (both profiles) and two SWE-bench
// Verified instances, and checks which listing commands and identity each
// env and instance node gets: the fixture Python profile's pip freeze and
// dpkg-query, the JS profile's dpkg-query, upstream Python's conda list
// --explicit --md5 and pip freeze --all in the testbed env; an env names
// every instance it serves; base nodes get nothing.
func TestAddInventory(t *testing.T) {
	fx := stacktest.FixtureDir(t)
	shared := spectest.SharedDir(t)
	type want struct {
		formats      []string
		repo, ver    string
		instanceIDs  []string
		runSubstring string
	}
	for _, tc := range []struct {
		name      string
		in        Inputs
		envs      map[string]want // by platform-less key prefix
		instances map[string]want
	}{
		{"fixture", Inputs{Dataset: filepath.Join(fx, "dataset.jsonl"), Specs: filepath.Join(fx, "specs.json"),
			Instances: []string{"fixture__calc-1", "fixture__textutil-1", "fixture__semver-1"}},
			map[string]want{
				"sweb.env.fixture.x86_64.": {[]string{sbom.FormatPipFreeze, sbom.FormatDpkgQuery}, "", "", []string{"fixture__calc-1", "fixture__textutil-1"}, "/opt/testbed/bin/activate"},
				"sweb.env.js.x86_64.":      {[]string{sbom.FormatDpkgQuery}, "fixture/semver", "1.0", []string{"fixture__semver-1"}, "dpkg-query"},
			},
			map[string]want{
				"fixture__calc-1":   {[]string{sbom.FormatPipFreeze, sbom.FormatDpkgQuery}, "fixture/calc", "1.0", []string{"fixture__calc-1"}, "pip freeze --all"},
				"fixture__semver-1": {[]string{sbom.FormatDpkgQuery}, "fixture/semver", "1.0", []string{"fixture__semver-1"}, "dpkg-query"},
			}},
		{"upstream", Inputs{Dataset: filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"), Instances: []string{"django__django-11099"}},
			map[string]want{
				"sweb.env.py.x86_64.": {[]string{sbom.FormatCondaExplicit, sbom.FormatPipFreeze}, "django/django", "3.0", []string{"django__django-11099"}, "conda activate testbed && conda list --explicit --md5"},
			},
			map[string]want{
				"django__django-11099": {[]string{sbom.FormatCondaExplicit, sbom.FormatPipFreeze}, "django/django", "3.0", []string{"django__django-11099"}, "python -m pip freeze --all"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			in := tc.in
			in.CacheDir, in.Pins, in.Log = t.TempDir(), "none", &stderr
			l, err := Load(context.Background(), in)
			if err != nil {
				t.Fatalf("load: %v\n%s", err, stderr.String())
			}
			p, err := plan.Build(context.Background(), l.Renderer, l.Instances, []core.Platform{core.AMD64})
			if err != nil {
				t.Fatal(err)
			}
			// Nodes wants the profiles' context files (rootfs tarballs,
			// the mirror directory) on disk; their contents do not
			// matter here.
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "mirror"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"rootfs-amd64.tar", "rootfs-js-amd64.tar"} {
				if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			nodes, err := Nodes(p, l.Instances, []string{dir})
			if err != nil {
				t.Fatal(err)
			}
			AddInventory(nodes, p, l.Instances, l.Renderer.Tables)
			check := func(what string, inv *graph.Inventory, w want) {
				t.Helper()
				if inv == nil {
					t.Errorf("%s: no inventory", what)
					return
				}
				var formats []string
				for _, c := range inv.Commands {
					formats = append(formats, c.Format)
				}
				if !reflect.DeepEqual(formats, w.formats) || inv.Repo != w.repo || inv.Version != w.ver || !reflect.DeepEqual(inv.InstanceIDs, w.instanceIDs) {
					t.Errorf("%s: inventory %+v, want formats %v repo %q version %q instances %v", what, inv, w.formats, w.repo, w.ver, w.instanceIDs)
				}
				found := false
				for _, c := range inv.Commands {
					found = found || bytes.Contains([]byte(c.Run), []byte(w.runSubstring))
				}
				if !found {
					t.Errorf("%s: no command runs %q: %+v", what, w.runSubstring, inv.Commands)
				}
			}
			seen := 0
			for _, n := range nodes {
				switch n.Kind {
				case graph.KindBase:
					if n.Inventory != nil {
						t.Errorf("%s: a base node with an inventory", n.ID())
					}
				case graph.KindEnv:
					for prefix, w := range tc.envs {
						if len(n.Key) > len(prefix) && n.Key[:len(prefix)] == prefix {
							check(n.ID(), n.Inventory, w)
							seen++
						}
					}
				case graph.KindInstance:
					if w, ok := tc.instances[n.InstanceID]; ok {
						check(n.ID(), n.Inventory, w)
						seen++
					}
				}
			}
			if seen != len(tc.envs)+len(tc.instances) {
				t.Errorf("checked %d nodes, want %d", seen, len(tc.envs)+len(tc.instances))
			}
		})
	}
}
