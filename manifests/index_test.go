package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
)

const (
	dAMD = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	dARM = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestBuildIndex(t *testing.T) {
	amd := Child{Platform: core.AMD64, Digest: dAMD, Size: 100, MediaType: types.OCIManifestSchema1, SpecKey: "s1"}
	arm := Child{Platform: core.ARM64, Digest: dARM, Size: 200, MediaType: types.DockerManifestSchema2, SpecKey: "s2"}
	info := IndexInfo{InstanceID: "django__django-11099", BaseCommit: "abc123", Version: "v1.2.3"}
	for _, tc := range []struct {
		name     string
		children []Child
		wantErr  string
		wantPlat []string
	}{
		{"two platforms, given arm first", []Child{arm, amd}, "", []string{"amd64", "arm64"}},
		{"x86 only", []Child{amd}, "", []string{"amd64"}},
		{"arm only", []Child{arm}, "no linux/amd64", nil},
		{"duplicate", []Child{amd, amd}, "listed twice", nil},
		{"no platform", []Child{amd, {Digest: dARM, Size: 1}}, "has no platform", nil},
		{"bad digest", []Child{{Platform: core.AMD64, Digest: "sha256:xyz", Size: 1}}, "digest", nil},
		{"zero size", []Child{{Platform: core.AMD64, Digest: dAMD}}, "size", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, err := BuildIndex(info, tc.children)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(idx.Raw)
			if idx.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Errorf("digest %s does not match bytes", idx.Digest)
			}
			var m v1.IndexManifest
			if err := json.Unmarshal(idx.Raw, &m); err != nil {
				t.Fatal(err)
			}
			if m.MediaType != types.OCIImageIndex || m.SchemaVersion != 2 {
				t.Errorf("media type %q schema %d", m.MediaType, m.SchemaVersion)
			}
			var plats []string
			for _, d := range m.Manifests {
				plats = append(plats, d.Platform.Architecture)
				if d.Platform.OS != "linux" || d.Annotations[AnnotationSpecKey] == "" {
					t.Errorf("child %+v", d)
				}
			}
			if strings.Join(plats, ",") != strings.Join(tc.wantPlat, ",") {
				t.Errorf("platforms %v, want %v", plats, tc.wantPlat)
			}
			if m.Manifests[0].Digest.String() != dAMD || m.Manifests[0].Size != 100 || m.Manifests[0].MediaType != types.OCIManifestSchema1 {
				t.Errorf("amd64 descriptor %+v", m.Manifests[0])
			}
			a := m.Annotations
			if a[AnnotationInstanceID] != info.InstanceID || a[AnnotationBaseCommit] != "abc123" || a[AnnotationRevision] != "abc123" || a[AnnotationVersion] != "v1.2.3" || a[AnnotationSpecKey] == "" {
				t.Errorf("annotations %v", a)
			}
			// Same input, same bytes, whatever the child order.
			rev := append([]Child(nil), tc.children...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			again, err := BuildIndex(info, rev)
			if err != nil || again.Digest != idx.Digest {
				t.Errorf("not deterministic: %v %s %s", err, again.Digest, idx.Digest)
			}
		})
	}
	if _, err := BuildIndex(IndexInfo{}, []Child{amd}); err == nil {
		t.Error("empty instance id accepted")
	}
}

func TestContentTagForChildrenChangesWithAnySpecKey(t *testing.T) {
	a := []Child{{Platform: core.AMD64, SpecKey: "x"}, {Platform: core.ARM64, SpecKey: "y"}}
	b := []Child{{Platform: core.AMD64, SpecKey: "x"}, {Platform: core.ARM64, SpecKey: "y2"}}
	c := []Child{{Platform: core.AMD64, SpecKey: "y"}, {Platform: core.ARM64, SpecKey: "x"}}
	ta, tb, tc := ContentTagForChildren(a), ContentTagForChildren(b), ContentTagForChildren(c)
	if ta == tb || ta == tc {
		t.Errorf("tags collide: %s %s %s", ta, tb, tc)
	}
}

// TestBuildIndexMatchesPublished rebuilds an index a real `make demo` run
// pushed to the local registry (testdata/published-index.json, copied from
// the registry's blob store; its name is its sha256) from the records it
// was made of, and wants the same bytes: an index assembled again for the
// same children must keep its digest, or every nightly re-run would push
// every index again.
func TestBuildIndexMatchesPublished(t *testing.T) {
	raw, err := os.ReadFile("testdata/published-index.json")
	if err != nil {
		t.Fatal(err)
	}
	const want = "sha256:63bd06426a81c9450a822a34c5c06f82c69c18fb8cab3d9bec85927cd6129d12"
	var m v1.IndexManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var children []Child
	for _, d := range m.Manifests {
		p, err := core.ParsePlatform(d.Platform.OS + "/" + d.Platform.Architecture)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, Child{
			Platform:  p,
			Digest:    d.Digest.String(),
			Size:      d.Size,
			MediaType: d.MediaType,
			SpecKey:   d.Annotations[AnnotationSpecKey],
		})
	}
	slices.Reverse(children) // BuildIndex orders them itself
	info := IndexInfo{
		InstanceID: m.Annotations[AnnotationInstanceID],
		BaseCommit: m.Annotations[AnnotationBaseCommit],
		Version:    m.Annotations[AnnotationVersion],
	}
	idx, err := BuildIndex(info, children)
	if err != nil {
		t.Fatal(err)
	}
	if idx.Digest != want || string(idx.Raw) != string(raw) {
		t.Errorf("rebuilt index %s differs from the published %s:\n got %s\nwant %s", idx.Digest, want, idx.Raw, raw)
	}
}
