package publish

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func TestReadMetadataValidatesEachEntryWithLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "md.json")
	data := `{
  "images": [
    {"instance_id": "a__a-1", "node": "instance", "platform": "linux/amd64", "arch": "x86_64",
     "digest": "` + goodDigest + `", "oci_layout": "oci", "spec_key": "k1", "verified": true},
    {"instance_id": "a__a-1", "platform": "linux/arm64", "arch": "x86_64",
     "digest": "` + goodDigest + `", "oci_layout": "oci", "spec_key": "k1", "verified": null},
    {"instance_id": "b__b-2", "platform": "linux/amd64",
     "digest": "sha256:nothex", "ref": "r/x@sha256:nothex", "spec_key": "k"},
    {"instance_id": "c__c-3", "platform": "linux/amd64",
     "digest": "` + goodDigest + `", "ref": "127.0.0.1:5000/x@sha256:2222222222222222222222222222222222222222222222222222222222222222", "spec_key": "k"},
    {"instance_id": "d__d-4", "platform": "linux/amd64", "digest": "` + goodDigest + `", "spec_key": "k"},
    {"instance_id": "e__e-5", "platform": "linux/amd64", "digest": "` + goodDigest + `", "ref": "h/r@` + goodDigest + `"},
    {"instance_id": "", "platform": "linux/amd64", "digest": "` + goodDigest + `", "ref": "h/r@` + goodDigest + `", "spec_key": "k"},
    {"node": "env", "platform": "linux/amd64", "digest": "` + goodDigest + `", "ref": "h/r@` + goodDigest + `", "spec_key": "k"},
    {"instance_id": "f__f-6", "platform": "linux/amd64", "digest": "` + goodDigest + `", "ref": "h/r@` + goodDigest + `", "spec_key": "k", "colour": "red"},
    {"instance_id": "g__g-7", "node": "leaf", "platform": "linux/amd64", "digest": "` + goodDigest + `", "ref": "h/r@` + goodDigest + `", "spec_key": "k"}
  ]
}
`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := ReadMetadata(path)
	if md == nil {
		t.Fatalf("no metadata: %v", err)
	}
	if len(md.Images) != 2 || md.Images[0].InstanceID != "a__a-1" || md.Images[1].NodeKind() != NodeEnv {
		t.Fatalf("valid entries %+v", md.Images)
	}
	if md.Images[0].OCILayout != filepath.Join(dir, "oci") {
		t.Errorf("layout not resolved against the file: %q", md.Images[0].OCILayout)
	}
	if md.Images[0].Verified == nil || !*md.Images[0].Verified {
		t.Error("verified lost")
	}
	want := []string{
		path + ":5: images[1].arch:",
		path + ":7: images[2].digest:",
		path + ":9: images[3].ref:",
		path + ":11: images[4].ref: one of ref or oci_layout",
		path + ":12: images[5].spec_key: required",
		path + ":13: images[6].instance_id: required",
		path + ":15: images[8].*: json: unknown field \"colour\"",
		path + ":16: images[9].node:",
	}
	if err == nil {
		t.Fatal("no error for bad entries")
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Error("not a FieldError")
	}
}

func TestReadMetadataBadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadMetadata(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
	p := filepath.Join(dir, "bad.json")
	os.WriteFile(p, []byte(`{"images": [`), 0o644)
	if md, err := ReadMetadata(p); err == nil || md != nil || !strings.Contains(err.Error(), p) {
		t.Errorf("truncated JSON: %v %v", md, err)
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	yes := true
	md := &Metadata{Images: []Image{{InstanceID: "x__y-1", Platform: "linux/arm64", Arch: "arm64", Digest: goodDigest, Ref: "h/r@" + goodDigest, SpecKey: "k", Verified: &yes}, {InstanceID: "x__y-1", Platform: "linux/amd64", Digest: goodDigest, Ref: "h/r@" + goodDigest, SpecKey: "k"}}}
	p := filepath.Join(t.TempDir(), "md.json")
	if err := WriteMetadata(p, md); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), `"verified": null`) {
		t.Errorf("unverified image must say null:\n%s", b)
	}
	got, err := ReadMetadata(p)
	if err != nil || len(got.Images) != 2 || *got.Images[0].Verified != true || got.Images[1].Verified != nil {
		t.Fatalf("%+v %v", got, err)
	}
}
