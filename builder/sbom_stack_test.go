package builder

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/sbom"
)

// TestSBOMCaptureFailures builds three instance images on the fixture's
// Debian rootfs with a push: one whose listings work, one whose listing
// command exits non-zero, one whose listing prints what its format cannot
// parse. Every image is built and pushed; the two failures keep no SBOM,
// say which command failed with the tail of its output, are listed in the
// summary, and make Build return an error; the good one's SBOM is attached.
func TestSBOMCaptureFailures(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	baseDockerfile, baseFiles := stacktest.RootfsBase(t, "amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	salt := time.Now().Format(time.RFC3339Nano)
	p := core.AMD64
	baseKey := "swebuild-sbomtest.base.x86_64:latest"
	dpkg := graph.ListingCommand{Format: sbom.FormatDpkgQuery, Run: `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'`}
	inst := func(id string, cmds ...graph.ListingCommand) *graph.Node {
		return &graph.Node{Key: "swebuild-sbomtest.eval.x86_64." + id + ":latest", Kind: graph.KindInstance, Platform: p, InstanceID: "sbom__" + id + "-1",
			Parents: []string{baseKey}, Dockerfile: []byte("FROM " + baseKey + "\nRUN echo " + id + " " + salt + " > /id\n"),
			Inventory: &graph.Inventory{Commands: cmds, Repo: "sbom/" + id, Version: "1.0", InstanceIDs: []string{"sbom__" + id + "-1"}}}
	}
	nodes := []*graph.Node{
		{Key: baseKey, Kind: graph.KindBase, Platform: p, Dockerfile: baseDockerfile, ContextFiles: baseFiles},
		inst("good", dpkg, graph.ListingCommand{Format: sbom.FormatPipFreeze, Run: "python3 -m venv --system-site-packages /tmp/v && /tmp/v/bin/python -m pip freeze --all"}),
		inst("exits", dpkg, graph.ListingCommand{Format: sbom.FormatPipFreeze, Run: "echo first-line; echo broken-env >&2; exit 3"}),
		inst("garbage", graph.ListingCommand{Format: sbom.FormatDpkgQuery, Run: "echo 'not a dpkg line'"}),
	}
	push := st.Registry + "/swebuild-test/sbom-failures"
	runDir := t.TempDir()
	rep, err := Build(ctx, nodes, Options{Builders: []BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, RunDir: runDir, Progress: "quiet", Push: push})
	if rep == nil {
		t.Fatalf("Build: %v", err)
	}
	var sum bytes.Buffer
	if err := rep.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", sum.String())
	if err == nil || !strings.Contains(err.Error(), "2 built image(s) have no SBOM") {
		t.Fatalf("Build error %v, want one saying 2 images have no SBOM", err)
	}
	if !strings.Contains(sum.String(), "SBOMs: 1 captured") || !strings.Contains(sum.String(), "1 attached, 2 failed") {
		t.Errorf("summary has no SBOM line with 1 captured, 1 attached, 2 failed")
	}
	recs := map[string]core.Image{}
	for _, r := range rep.Records() {
		recs[r.InstanceID] = r
	}
	for _, res := range rep.Results {
		n, o := res.Node, res.Outcome
		if res.Status != StatusDone || o.Digest == "" || o.Ref == "" {
			t.Errorf("%s: status %s digest %q ref %q: a failed listing must not fail the image", n.ID(), res.Status, o.Digest, o.Ref)
		}
		if n.Kind != graph.KindInstance {
			continue
		}
		r := recs[n.InstanceID]
		switch n.InstanceID {
		case "sbom__good-1":
			doc, err := sbom.Decode(o.SBOM)
			if err != nil || o.SBOMError != "" {
				t.Fatalf("good: SBOM %v, error %q", err, o.SBOMError)
			}
			pkgs := map[string]int{}
			for _, pk := range doc.Packages {
				pkgs[pk.Ecosystem]++
			}
			if doc.Subject != o.Digest || doc.Repo != "sbom/good" || pkgs[sbom.Deb] < 50 || pkgs[sbom.PyPI] < 3 {
				t.Errorf("good: subject %s (image %s), repo %q, packages %v", doc.Subject, o.Digest, doc.Repo, pkgs)
			}
			if o.SBOMArtifact == "" || r.SBOM.String() != o.SBOMArtifact || r.SBOMError != "" {
				t.Errorf("good: artifact %q, record sbom %q error %q", o.SBOMArtifact, r.SBOM, r.SBOMError)
			}
		case "sbom__exits-1":
			for _, want := range []string{`"echo first-line; echo broken-env >&2; exit 3" exited with 3`, "first-line", "broken-env"} {
				if !strings.Contains(o.SBOMError, want) {
					t.Errorf("exits: SBOM error %q lacks %q", o.SBOMError, want)
				}
			}
			if o.SBOM != nil || o.SBOMArtifact != "" || r.SBOM != "" || r.SBOMError != o.SBOMError || !r.OK() {
				t.Errorf("exits: an SBOM was kept (%d bytes, artifact %q), or the record %+v is not a good image with the SBOM error", len(o.SBOM), o.SBOMArtifact, r)
			}
		case "sbom__garbage-1":
			if !strings.Contains(o.SBOMError, `line 1 "not a dpkg line"`) || !strings.Contains(o.SBOMError, "dpkg-query listing") {
				t.Errorf("garbage: SBOM error %q", o.SBOMError)
			}
		}
	}

	// The same build again: every step and the listing are cache hits, the
	// document has the same bytes, and its attachment is found (one HEAD),
	// not written again.
	again, _ := Build(ctx, nodes, Options{Builders: []BuilderSpec{{Addr: st.BuildkitHost}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet", Push: push})
	if again == nil {
		t.Fatal("second Build returned no report")
	}
	for i, res := range again.Results {
		if res.Node.InstanceID != "sbom__good-1" {
			continue
		}
		first := rep.Results[i].Outcome
		log, _ := os.ReadFile(res.LogPath)
		if !bytes.Equal(res.Outcome.SBOM, first.SBOM) || res.Outcome.SBOMArtifact != first.SBOMArtifact || !strings.Contains(string(log), "found attached as "+first.SBOMArtifact) {
			t.Errorf("rebuild: SBOM %d bytes (first %d), artifact %s (first %s); log:\n%s", len(res.Outcome.SBOM), len(first.SBOM), res.Outcome.SBOMArtifact, first.SBOMArtifact, log)
		}
	}
}
