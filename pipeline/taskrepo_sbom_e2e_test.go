package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// TestTaskRepoInventory builds the fixture task repo (7 tasks: 5 on the py
// base, whose Dockerfile makes a venv in /opt/testbed activated by
// ~/.bashrc, and 2 on the js base, which has no pip) for linux/amd64 with a
// push, and checks the default task listing (TaskInventory) on every
// image: each has an SBOM attached in the push repository, none failed;
// every image lists its Debian packages; the py images list the venv's
// pip packages (pytest, and the task's own package installed editable);
// the js images list no pip and no conda package and do not fail.
func TestTaskRepoInventory(t *testing.T) {
	st := stacktest.Require(t)
	root, err := stacktest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	images := fixtureBases(t, ctx, st)
	var out strings.Builder
	push := st.Registry + "/swebuild-test/taskrepo-sbom"
	res, err := Build(ctx, BuildOptions{
		Inputs: Inputs{TaskRepo: filepath.Join(root, "testdata", "fixture", "taskrepo"),
			Specs: filepath.Join(root, "testdata", "fixture", "specs.json"), Pins: "default", CacheDir: t.TempDir()},
		Platforms: []core.Platform{core.AMD64},
		Builder: builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, Images: images,
			Push: push, RunDir: t.TempDir(), Progress: "quiet"},
		Out: &out,
	})
	t.Logf("%s", out.String())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !strings.Contains(out.String(), "SBOMs: 7 captured") || !strings.Contains(out.String(), "7 attached, 0 failed") {
		t.Errorf("the summary does not say 7 SBOMs captured and attached, 0 failed")
	}
	c, err := registry.New(registry.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: c}
	repo, err := name.NewRepository(push, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	py := map[string]string{"fixture__calc-1": "calc", "fixture__calc-2": "calc", "fixture__textutil-1": "textutil", "fixture__textutil-2": "textutil", "fixture__textutil-3": "textutil"}
	checked := 0
	for _, r := range res.Report.Results {
		o, id := r.Outcome, r.Node.InstanceID
		if r.Status != builder.StatusDone || o.SBOMError != "" || o.SBOM == nil || o.SBOMArtifact == "" {
			t.Errorf("%s: status %s, SBOM %d bytes, artifact %q, error %q", id, r.Status, len(o.SBOM), o.SBOMArtifact, o.SBOMError)
			continue
		}
		doc, err := sbom.Decode(o.SBOM)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		pip := map[string]string{}
		for _, p := range doc.Packages {
			n[p.Ecosystem]++
			if p.Ecosystem == sbom.PyPI {
				pip[p.Name] = p.Version
			}
		}
		t.Logf("%s: %d deb, %d pypi, %d conda packages; pytest %q, %s %q", id, n[sbom.Deb], n[sbom.PyPI], n[sbom.Conda], pip["pytest"], py[id], pip[py[id]])
		if n[sbom.Deb] < 50 || n[sbom.Conda] != 0 || doc.Subject != o.Digest || len(doc.InstanceIDs) != 1 || doc.InstanceIDs[0] != id {
			t.Errorf("%s: %v packages by ecosystem, subject %s (image %s), instances %v", id, n, doc.Subject, o.Digest, doc.InstanceIDs)
		}
		if pkg, ok := py[id]; ok {
			if pip["pytest"] == "" || pip[pkg] == "" || pip["pip"] == "" {
				t.Errorf("%s: pip packages %v lack pytest, pip or %s", id, pip, pkg)
			}
		} else if n[sbom.PyPI] != 0 {
			t.Errorf("%s: a js image lists pip packages %v", id, pip)
		}
		h, _ := v1.NewHash(o.Digest)
		list, err := refs.List(ctx, repo, h)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range list {
			found = found || (d.Digest.String() == o.SBOMArtifact && d.ArtifactType == sbom.MediaType)
		}
		if !found {
			t.Errorf("%s: SBOM %s not among the referrers %v of %s in %s", id, o.SBOMArtifact, list, o.Digest, push)
		}
		checked++
	}
	if checked != 7 {
		t.Errorf("%d task images checked, want 7", checked)
	}
}
