package publish

import (
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/swebuild/swebuild/manifests"
)

// TestRecordsFromLayoutEntryErrors: an instance entry of index.json that
// cannot be an instance image is an error naming index.json, the entry,
// the instance and the field; the good entry is still returned.
func TestRecordsFromLayoutEntryErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	ann := func(id string) map[string]string {
		return map[string]string{manifests.AnnotationInstanceID: id, manifests.AnnotationSpecKey: "sha256:k"}
	}
	img := func() v1.Image {
		i, err := random.Image(16, 1)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(lp.AppendImage(img(), layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64"}), layout.WithAnnotations(ann("good__x-1"))))
	must(lp.AppendIndex(mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img()}), layout.WithAnnotations(ann("index__x-2"))))
	must(lp.AppendImage(img(), layout.WithAnnotations(ann("noplat__x-3"))))
	must(lp.AppendImage(img(), layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "s390x"}), layout.WithAnnotations(ann("s390x__x-4"))))

	recs, errs, err := RecordsFromLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].InstanceID != "good__x-1" {
		t.Errorf("records %+v, want good__x-1 only", recs)
	}
	file := filepath.Join(dir, "index.json")
	want := []string{
		file + `: manifests[1] (index__x-2): mediaType: "application/vnd.oci.image.index.v1+json" is not an image manifest`,
		file + ": manifests[2] (noplat__x-3): platform: missing",
		file + `: manifests[3] (s390x__x-4): platform: platform "linux/s390x" is not supported`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %v\nwant %s", i, errs[i], w)
		}
	}
	if _, _, err := RecordsFromLayout(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "opening OCI layout") {
		t.Errorf("no layout: err = %v", err)
	}
}
