package publish

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
)

// The unit tier: go-containerregistry's in-memory registry behind httptest
// (as ko and crane test), no daemons. The real distribution registry and
// the fault proxy are the end-to-end tier (publish_test.go, e2e_test.go).

// memRegistry is an in-memory registry that logs "METHOD PATH" of every
// request.
type memRegistry struct {
	srv *httptest.Server
	mu  sync.Mutex
	log []string
}

func startMem(t *testing.T) *memRegistry {
	t.Helper()
	m := &memRegistry{}
	h := ggcrregistry.New()
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.log = append(m.log, r.Method+" "+r.URL.Path)
		m.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *memRegistry) host() string { return strings.TrimPrefix(m.srv.URL, "http://") }

func (m *memRegistry) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

func publishMem(t *testing.T, repo string, recs []core.Image, mods ...func(*Options)) (*Summary, string) {
	t.Helper()
	led, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	var progress bytes.Buffer
	opts := Options{Repo: repo, Client: testClient(t, -1), Ledger: led, Jobs: 4, Version: "test", Progress: &progress}
	for _, m := range mods {
		m(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Publish(ctx, recs, opts)
	if err != nil {
		t.Fatalf("publish: %v\n%s", err, progress.String())
	}
	return sum, progress.String()
}

// Staging -> release between two registries: every index lists exactly the
// built digests, every child is in the index repository, and the index of
// an instance is put only after both its children.
func TestPublishBetweenTwoRegistries(t *testing.T) {
	src, dst := startMem(t), startMem(t)
	f := makeFixture(t, []string{"a__a-1", "b__b-2", "c__c-3"}, map[string]bool{"c__c-3": true}, 2048, 2)
	f.stage(t, src.host(), src.host(), "staging/build")
	sum, progress := publishMem(t, dst.host()+"/release", f.recs())
	if err := sum.Err(); err != nil || sum.ImagesPushed != 5 || sum.IndexesPushed != 3 {
		t.Fatalf("%+v %v\n%s", sum, err, progress)
	}
	n := manifests.Namer{Repo: dst.host() + "/release"}
	for _, id := range []string{"a__a-1", "b__b-2", "c__c-3"} {
		ref, err := testClient(t, -1).ParseReference(n.IndexRepo(id) + ":latest")
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range im.Manifests {
			got = append(got, d.Platform.OS+"/"+d.Platform.Architecture+"="+d.Digest.String())
			if _, err := idx.Image(d.Digest); err != nil {
				t.Errorf("%s: child %s not in the index repository: %v", id, d.Digest, err)
			}
		}
		want := []string{"linux/amd64=" + f.digests[id+" linux/amd64"]}
		if id != "c__c-3" {
			want = append(want, "linux/arm64="+f.digests[id+" linux/arm64"])
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: index lists %v, built %v", id, got, want)
		}
		// Order at the release registry: child manifests into the index
		// repository, then the index.
		repoPath := "/v2/" + strings.TrimPrefix(n.IndexRepo(id), dst.host()+"/") + "/manifests/"
		lastChild, firstIndex := -1, -1
		for i, r := range dst.requests() {
			if !strings.HasPrefix(r, "PUT "+repoPath) {
				continue
			}
			if strings.HasPrefix(r, "PUT "+repoPath+"sha256:") {
				lastChild = i
			} else if firstIndex < 0 {
				firstIndex = i
			}
		}
		if lastChild < 0 || firstIndex < lastChild {
			t.Errorf("%s: index put at request %d, last child at %d", id, firstIndex, lastChild)
		}
	}
}

// Only verified images go with RequireVerified: an image whose gold check
// failed or never ran is refused before any request, its instance gets no
// index, and the others are published.
func TestRequireVerifiedGatesImages(t *testing.T) {
	dst := startMem(t)
	f := makeFixture(t, []string{"a__a-1", "b__b-2", "c__c-3"}, nil, 1024, 1)
	no := false
	recs := f.recs()
	for i := range recs {
		switch {
		case recs[i].InstanceID == "b__b-2" && recs[i].Platform == core.ARM64:
			recs[i].Verified = &no
		case recs[i].InstanceID == "c__c-3" && recs[i].Platform == core.AMD64:
			recs[i].Verified = nil
		}
	}
	sum, progress := publishMem(t, dst.host()+"/gated", recs, func(o *Options) { o.RequireVerified = true })
	if sum.ImagesPushed != 4 || sum.ImagesFailed != 2 || sum.IndexesPushed != 1 || sum.IndexesFailed != 2 || sum.Err() == nil {
		t.Errorf("summary %+v\n%s", sum, progress)
	}
	for _, want := range []string{"FAILED  image b__b-2 linux/arm64: not verified", "FAILED  image c__c-3 linux/amd64: not verified", "pushed  index a__a-1"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	for _, r := range dst.requests() {
		if strings.Contains(r, "b_1776_b-2/manifests/") && strings.Contains(r, "arm64") || strings.Contains(r, "x86_64.c_1776_c-3") {
			t.Errorf("request for a refused image: %s", r)
		}
	}
}

// A ledger that cannot be written fails what could not be recorded; the
// run reports it instead of dropping it.
func TestLedgerWriteErrorFailsThePublish(t *testing.T) {
	dst := startMem(t)
	f := makeFixture(t, []string{"a__a-1"}, map[string]bool{"a__a-1": true}, 1024, 1)
	led, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	led.Close() // every Append now fails
	var progress bytes.Buffer
	sum, err := Publish(context.Background(), f.recs(), Options{Repo: dst.host() + "/x", Client: testClient(t, -1), Ledger: led, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Err() == nil || sum.ImagesFailed != 1 || !strings.Contains(progress.String(), "writing the publish ledger") {
		t.Errorf("summary %+v:\n%s", sum, progress.String())
	}
}

// Records the input says failed, and base/env records, are not published.
func TestFailedAndNonInstanceRecords(t *testing.T) {
	dst := startMem(t)
	f := makeFixture(t, []string{"a__a-1"}, nil, 1024, 1)
	recs := f.recs()
	recs[1].Status, recs[1].Error = core.StatusFailed, "build: exit 1"
	recs = append(recs, core.Image{Kind: core.KindEnv, Key: "sweb.env.py.x86_64.abc:latest", Platform: core.AMD64, Status: core.StatusBuilt})
	sum, progress := publishMem(t, dst.host()+"/x", recs)
	if sum.Ignored != 1 || sum.ImagesFailed != 1 || sum.IndexesFailed != 1 || !strings.Contains(progress, "not built: build: exit 1") {
		t.Errorf("summary %+v:\n%s", sum, progress)
	}
}

// Ids that get the same image names (here "__" and "_1776_") are refused
// before anything is pushed, naming both; the others are published.
func TestCollidingIDsAreRefusedBeforeAnyPush(t *testing.T) {
	dst := startMem(t)
	f := makeFixture(t, []string{"a__a-1", "a_1776_a-1", "b__b-2"}, map[string]bool{"a__a-1": true, "a_1776_a-1": true, "b__b-2": true}, 1024, 1)
	sum, progress := publishMem(t, dst.host()+"/names", f.recs())
	if sum.ImagesFailed != 2 || sum.IndexesFailed != 2 || sum.IndexesPushed != 1 || sum.Err() == nil {
		t.Errorf("summary %+v\n%s", sum, progress)
	}
	if !strings.Contains(progress, `instance ids "a_1776_a-1" and "a__a-1" get the same image names`) {
		t.Errorf("no collision named:\n%s", progress)
	}
	for _, r := range dst.requests() {
		if strings.Contains(r, "a_1776_a-1") {
			t.Errorf("request for a colliding id: %s", r)
		}
	}
}

// A record of an image the build did not export (no ref, no OCI layout) is
// refused without a request, saying how to export it; the instance gets no
// index.
func TestPublishRefusesUnexportedRecords(t *testing.T) {
	dst := startMem(t)
	recs := []core.Image{{
		Kind: core.KindInstance, InstanceID: "a__b-1", Platform: core.AMD64, Status: core.StatusBuilt,
		Digest: digest.Digest("sha256:" + strings.Repeat("1", 64)), SpecKey: "sha256:" + strings.Repeat("2", 64),
	}}
	sum, progress := publishMem(t, dst.host()+"/rel", recs)
	if sum.ImagesFailed != 1 || sum.IndexesFailed != 1 || sum.ImagesPushed+sum.IndexesPushed != 0 {
		t.Errorf("summary %+v, want the image and its index failed", sum)
	}
	if !strings.Contains(progress, "nothing to publish from") || !strings.Contains(progress, "--output type=oci,dest=DIR") {
		t.Errorf("progress does not say how to export:\n%s", progress)
	}
	if reqs := dst.requests(); len(reqs) != 0 {
		t.Errorf("%d requests for a record with nothing to publish from: %v", len(reqs), reqs)
	}
}
