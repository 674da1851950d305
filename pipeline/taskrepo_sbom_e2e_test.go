package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/builder/graph"
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
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	images := fixtureBases(t, ctx, st)
	var out strings.Builder
	push := st.Registry + "/swebuild-test/taskrepo-sbom"
	res, err := Build(ctx, BuildOptions{
		Inputs:    fixtureTaskRepoInputs(t),
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

// TestTaskInventoryBranches runs the default task listing on images of the
// fixture's Debian rootfs that the fixture task repo does not cover: one
// with a python3 that has no pip and no ~/.bashrc (lists Debian packages
// only, does not fail), and one with a conda at /opt/miniconda3 (a
// stand-in script, not a real conda: it prints a fixed explicit listing
// for `conda list --explicit --md5` in the env `conda activate` last
// named, which shows that the listing activates testbed and reads
// conda's output).
func TestTaskInventoryBranches(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	baseDockerfile, baseFiles := stacktest.RootfsBase(t, "amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	salt := time.Now().Format(time.RFC3339Nano)
	p := core.AMD64
	baseKey := "swebuild-taskinv.base.x86_64:latest"
	conda := `#!/bin/sh
case "$1" in
activate) echo "$2" > /tmp/conda-env ;;
list) echo "# platform: linux-64"; echo "@EXPLICIT"; echo "https://repo.anaconda.com/pkgs/main/linux-64/zlib-1.2.13-h5eee18b_1.conda#92e42d8310108b0a440fb2e60b2b2a25"; echo "https://repo.anaconda.com/pkgs/main/linux-64/env-$(cat /tmp/conda-env)-1.0-0.conda#00000000000000000000000000000000" ;;
esac
`
	inst := func(id, df string, files map[string][]byte) *graph.Node {
		return &graph.Node{Key: "swebuild-taskinv.eval.x86_64." + id + ":latest", Kind: graph.KindInstance, Platform: p, InstanceID: "taskinv__" + id + "-1",
			Parents: []string{baseKey}, Dockerfile: []byte("FROM " + baseKey + "\nRUN echo " + salt + " > /id\n" + df), Context: files,
			Inventory: &graph.Inventory{Commands: TaskInventory(), InstanceIDs: []string{"taskinv__" + id + "-1"}}}
	}
	nodes := []*graph.Node{
		{Key: baseKey, Kind: graph.KindBase, Platform: p, Dockerfile: baseDockerfile, ContextFiles: baseFiles},
		inst("nopip", "", nil),
		inst("conda", "COPY conda /opt/miniconda3/bin/conda\nRUN chmod +x /opt/miniconda3/bin/conda && echo 'export PATH=/opt/miniconda3/bin:$PATH' > /opt/miniconda3/bin/activate\n",
			map[string][]byte{"conda": []byte(conda)}),
	}
	rep, err := builder.Build(ctx, nodes, builder.Options{Builders: []builder.BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet"})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, r := range rep.Results {
		if r.Node.Kind != graph.KindInstance {
			continue
		}
		o := r.Outcome
		doc, err := sbom.Decode(o.SBOM)
		if err != nil || o.SBOMError != "" {
			t.Fatalf("%s: SBOM %v, error %q", r.Node.ID(), err, o.SBOMError)
		}
		n := map[string]int{}
		var condaNames []string
		for _, pk := range doc.Packages {
			n[pk.Ecosystem]++
			if pk.Ecosystem == sbom.Conda {
				condaNames = append(condaNames, pk.Name)
			}
		}
		t.Logf("%s: %v, conda %v", r.Node.InstanceID, n, condaNames)
		switch r.Node.InstanceID {
		case "taskinv__nopip-1":
			if n[sbom.Deb] < 50 || n[sbom.PyPI] != 0 || n[sbom.Conda] != 0 {
				t.Errorf("nopip: %v packages, want Debian's only", n)
			}
		case "taskinv__conda-1":
			if n[sbom.Deb] < 50 || strings.Join(condaNames, " ") != "env-testbed zlib" {
				t.Errorf("conda: %v packages, conda %v; want Debian's and the testbed env's zlib listing", n, condaNames)
			}
		}
	}
}
