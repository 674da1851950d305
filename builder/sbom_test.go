package builder

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// TestSBOMRecords: the SBOM artifact and a capture failure go into the
// metadata file through the one record codec, and the summary counts and
// names them; a node without an inventory adds no SBOM line.
func TestSBOMRecords(t *testing.T) {
	dg := "sha256:" + strings.Repeat("ab", 32)
	art := "sha256:" + strings.Repeat("cd", 32)
	inv := &graph.Inventory{Commands: []graph.ListingCommand{{Format: "dpkg-query", Run: "dpkg-query -W"}}}
	good := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-1", Dockerfile: []byte("FROM x"), Inventory: inv}
	bad := &graph.Node{Key: "sweb.eval.x86_64.a__b-2:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-2", Dockerfile: []byte("FROM y"), Inventory: inv}
	r := &Report{Results: []Result{
		{Node: good, Status: StatusDone, Outcome: Outcome{Digest: dg, Ref: "r@" + dg, SBOM: []byte("{}"), SBOMArtifact: art, SBOMArtifactSize: 658, SBOMSeconds: 1.5}},
		{Node: bad, Status: StatusDone, Outcome: Outcome{Digest: dg, Ref: "r@" + dg, SBOMError: `listing command "dpkg-query -W" exited with 2`, SBOMSeconds: 0.5}},
	}}
	path := filepath.Join(t.TempDir(), "md.jsonl")
	if err := core.WriteFile(path, r.Records()); err != nil {
		t.Fatal(err)
	}
	recs, err := core.ReadFile(path)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if recs[0].SBOM.String() != art || recs[0].SBOMSize != 658 || recs[0].SBOMError != "" || !recs[0].OK() {
		t.Errorf("record with an SBOM: %+v", recs[0])
	}
	if recs[1].SBOM != "" || !strings.Contains(recs[1].SBOMError, "exited with 2") || !recs[1].OK() {
		t.Errorf("record of a failed capture: %+v (the image itself is fine)", recs[1])
	}
	if r.SBOMFailed() != 1 {
		t.Errorf("SBOMFailed = %d", r.SBOMFailed())
	}
	var sb strings.Builder
	if err := r.WriteSummary(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "SBOMs: 1 captured (2.0s in all), 1 attached, 1 failed\n") ||
		!strings.Contains(sb.String(), "SBOM of sweb.eval.x86_64.a__b-2:latest@linux/amd64 (image kept, no SBOM): listing command") {
		t.Errorf("summary:\n%s", sb.String())
	}
	sb.Reset()
	good.Inventory, bad.Inventory = nil, nil
	_ = r.WriteSummary(&sb)
	if strings.Contains(sb.String(), "SBOM") {
		t.Errorf("an SBOM line without inventories:\n%s", sb.String())
	}
}

// TestPushedSubject: the subject of the artifact is the pushed image
// manifest, from the index resolveAttested read or from BuildKit's exported
// descriptor, never another digest.
func TestPushedSubject(t *testing.T) {
	dg := "sha256:" + strings.Repeat("ab", 32)
	desc := `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + dg + `","size":1234}`
	resp := &bkclient.SolveResponse{ExporterResponse: map[string]string{exptypes.ExporterImageDescriptorKey: base64.StdEncoding.EncodeToString([]byte(desc))}}
	d, err := pushedSubject(resp, &Outcome{Digest: dg})
	if err != nil || d.Digest.String() != dg || d.Size != 1234 || d.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("subject %+v, %v", d, err)
	}
	if _, err := pushedSubject(resp, &Outcome{Digest: "sha256:" + strings.Repeat("cd", 32)}); err == nil {
		t.Error("a descriptor of another image accepted")
	}
	if _, err := pushedSubject(&bkclient.SolveResponse{}, &Outcome{Digest: dg}); err == nil {
		t.Error("no descriptor accepted")
	}
}
