package publication_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/retry"
)

// testRegistry is go-containerregistry's in-memory registry behind a
// handler that answers for two repositories what a registry's policy
// would: 403 for denied/..., 400 for odd/...; tamper/... blobs are served
// with their bytes changed. With referrers, the registry serves the
// referrers API.
func testRegistry(t *testing.T, referrers bool) string {
	t.Helper()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)), ggcrregistry.WithReferrersSupport(referrers))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v2/denied/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`)
			return
		case strings.HasPrefix(r.URL.Path, "/v2/odd/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"errors":[{"code":"NAME_INVALID","message":"invalid repository name"}]}`)
			return
		case strings.HasPrefix(r.URL.Path, "/v2/tamper/") && strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet:
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[0] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func repoOf(t *testing.T, s string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ociImage is a random one-layer OCI image.
func ociImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	return mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// multiArch is an instance's index as publish writes it, BuildKit-style:
// its amd64 and arm64 images and an attestation manifest of the amd64
// one.
type multiArch struct {
	amd64, arm64, att v1.Image
	index             v1.ImageIndex
}

func newMultiArch(t *testing.T) multiArch {
	t.Helper()
	m := multiArch{amd64: ociImage(t), arm64: ociImage(t), att: ociImage(t)}
	m.index = mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: m.amd64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: m.arm64, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: m.att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": digestOf(t, m.amd64).String()}}},
	)
	return m
}

// publish writes an instance as publish does: each per-arch image under
// its per-arch name and the index (with its children) under the index
// name, in the prefix's naming.
func (m multiArch) publish(t *testing.T, p publication.Prefix, id string) {
	t.Helper()
	for pl, img := range map[core.Platform]v1.Image{core.AMD64: m.amd64, core.ARM64: m.arm64} {
		tag, err := name.NewTag(p.ArchName(id, pl), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
	}
	tag, err := name.NewTag(p.IndexName(id), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, m.index); err != nil {
		t.Fatal(err)
	}
}

// TestPrefixNames: the names of a prefix-named set are upstream's
// (sweb.eval.<arch>.<id>, "__" as "_1776_" unless kept), at the tag read.
func TestPrefixNames(t *testing.T) {
	for _, tc := range []struct {
		p           publication.Prefix
		arch, index string
	}{
		{publication.Prefix{Repo: "127.0.0.1:5000/swebench"}, "127.0.0.1:5000/swebench/sweb.eval.arm64.django_1776_django-11099:latest", "127.0.0.1:5000/swebench/sweb.eval.django_1776_django-11099:latest"},
		{publication.Prefix{Repo: "ghcr.io/o/swebench", Tag: "2026-12-01", KeepDoubleUnderscore: true}, "ghcr.io/o/swebench/sweb.eval.arm64.django__django-11099:2026-12-01", "ghcr.io/o/swebench/sweb.eval.django__django-11099:2026-12-01"},
	} {
		if got := tc.p.ArchName("django__django-11099", core.ARM64); got != tc.arch {
			t.Errorf("ArchName = %s, want %s", got, tc.arch)
		}
		if got := tc.p.IndexName("django__django-11099"); got != tc.index {
			t.Errorf("IndexName = %s, want %s", got, tc.index)
		}
	}
}

// TestReadPublication reads a prefix-named set: calc-1 published on both
// platforms with its index (and the index's attestation manifest); its
// arm64 child deleted from the index repository (what an untagged cleanup
// leaves); textutil-2 with its amd64 image only and no index; a per-arch
// name where the index should be.
func TestReadPublication(t *testing.T) {
	ctx := context.Background()
	host := testRegistry(t, false)
	p := publication.Prefix{Repo: host + "/pub"}
	calc := newMultiArch(t)
	calc.publish(t, p, "fixture__calc-1")
	semver := newMultiArch(t)
	semver.publish(t, p, "fixture__semver-1")
	indexRepo := repoOf(t, host+"/pub/sweb.eval.fixture_1776_semver-1")
	if err := remote.Delete(indexRepo.Digest(digestOf(t, semver.arm64).String())); err != nil {
		t.Fatal(err)
	}
	text := ociImage(t)
	textTag, _ := name.NewTag(p.ArchName("fixture__textutil-2", core.AMD64), name.Insecure)
	if err := remote.Write(textTag, text); err != nil {
		t.Fatal(err)
	}
	// An image under the name of calc-2's index.
	notIndex, _ := name.NewTag(p.IndexName("fixture__calc-2"), name.Insecure)
	if err := remote.Write(notIndex, ociImage(t)); err != nil {
		t.Fatal(err)
	}

	r := newReader(t)
	r.Jobs = 3
	got, err := r.Read(ctx, p, []publication.Want{
		{ID: "fixture__calc-1", Platforms: core.AllPlatforms()},
		{ID: "fixture__semver-1", Platforms: core.AllPlatforms()},
		{ID: "fixture__textutil-2", Platforms: []core.Platform{core.AMD64}},
		{ID: "fixture__calc-2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].ID != "fixture__calc-1" || got[2].ID != "fixture__textutil-2" {
		t.Fatalf("instances %+v", got)
	}
	c := got[0]
	if len(c.Images) != 2 || c.Images[0].Platform != core.AMD64 || !c.Images[0].Present || c.Images[0].Descriptor.Digest != digestOf(t, calc.amd64) ||
		c.Images[1].Platform != core.ARM64 || c.Images[1].Descriptor.Digest != digestOf(t, calc.arm64) {
		t.Errorf("calc-1's images %+v", c.Images)
	}
	if c.Images[0].Name != host+"/pub/sweb.eval.x86_64.fixture_1776_calc-1:latest" {
		t.Errorf("asked %s", c.Images[0].Name)
	}
	x := c.Index
	if !x.Present || x.NotIndex || x.Manifest == nil || len(x.Children) != 3 || x.Problem != nil {
		t.Fatalf("calc-1's index %+v", x)
	}
	for _, ch := range x.Children {
		if !ch.Present {
			t.Errorf("%s missing from the index repository", ch.What())
		}
	}
	if ch, ok := x.ChildOf(core.ARM64); !ok || ch.Descriptor.Digest != digestOf(t, calc.arm64) || ch.What() != "linux/arm64 child "+digestOf(t, calc.arm64).String() {
		t.Errorf("ChildOf(arm64) = %+v, %v", ch, ok)
	}
	att := x.Children[2]
	if !att.Attestation || att.Subject != digestOf(t, calc.amd64).String() || !att.Platform.IsZero() ||
		att.What() != "attestation manifest "+digestOf(t, calc.att).String()+" (of "+digestOf(t, calc.amd64).String()+")" {
		t.Errorf("attestation child %+v: %s", att, att.What())
	}
	s := got[1].Index
	if ch, ok := s.ChildOf(core.ARM64); !ok || ch.Present || ch.Problem != nil {
		t.Errorf("semver-1's arm64 child, deleted from the index repository: %+v", ch)
	}
	if ch, ok := s.ChildOf(core.AMD64); !ok || !ch.Present {
		t.Errorf("semver-1's amd64 child: %+v", ch)
	}
	tx := got[2]
	if !tx.Images[0].Present || tx.Images[0].Descriptor.Digest != digestOf(t, text) || tx.Index.Present || tx.Index.Problem != nil {
		t.Errorf("textutil-2: %+v", tx)
	}
	if n := got[3]; len(n.Images) != 0 || !n.Index.Present || !n.Index.NotIndex || n.Index.Manifest != nil {
		t.Errorf("calc-2's index name holding an image: %+v", n.Index)
	}
	if _, ok := tx.Index.ChildOf(core.AMD64); ok {
		t.Errorf("a child of a missing index")
	}
}

// TestChildWhat names children a message can point at.
func TestChildWhat(t *testing.T) {
	d := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	for _, tc := range []struct {
		c    publication.Child
		want string
	}{
		{publication.Child{Descriptor: v1.Descriptor{Digest: d}, Platform: core.AMD64}, "linux/amd64 child sha256:" + d.Hex},
		{publication.Child{Descriptor: v1.Descriptor{Digest: d, Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}}, "linux/s390x child sha256:" + d.Hex},
		{publication.Child{Descriptor: v1.Descriptor{Digest: d}}, "child sha256:" + d.Hex},
		{publication.Child{Descriptor: v1.Descriptor{Digest: d}, Attestation: true, Subject: "sha256:" + strings.Repeat("b", 64)}, "attestation manifest sha256:" + d.Hex + " (of sha256:" + strings.Repeat("b", 64) + ")"},
	} {
		if got := tc.c.What(); got != tc.want {
			t.Errorf("What() = %q, want %q", got, tc.want)
		}
	}
}

// TestHeadAndRefusals: a HEAD finds an image, says a missing one is
// missing (no problem, no error), and puts a registry's refusal (403) or
// another answer (400) in the Found as a *RefusedError or *AnswerError;
// a name that does not parse is an error.
func TestHeadAndRefusals(t *testing.T) {
	ctx := context.Background()
	host := testRegistry(t, false)
	img := ociImage(t)
	tag, _ := name.NewTag(host+"/pub/sweb.eval.x86_64.fixture_1776_calc-1:latest", name.Insecure)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	r := newReader(t)
	refs := []string{tag.String(), host + "/pub/sweb.eval.x86_64.fixture_1776_calc-2:latest", host + "/denied/x:latest", host + "/odd/x:latest"}
	got, err := r.HeadAll(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].Present || got[0].Descriptor.Digest != digestOf(t, img) || got[0].Problem != nil || got[0].Name != refs[0] {
		t.Errorf("present: %+v", got[0])
	}
	if got[1].Present || got[1].Problem != nil {
		t.Errorf("missing: %+v", got[1])
	}
	var re *publication.RefusedError
	if !errors.As(got[2].Problem, &re) || re.Status != http.StatusForbidden || re.Host != host || got[2].Present ||
		got[2].Problem.Error() != "access denied by "+host || re.Unwrap() == nil {
		t.Errorf("denied: %+v (%v)", got[2], got[2].Problem)
	}
	var ae *publication.AnswerError
	if !errors.As(got[3].Problem, &ae) || ae.Status != http.StatusBadRequest || !strings.HasPrefix(ae.Error(), "registry answered 400: ") || ae.Unwrap() == nil {
		t.Errorf("odd: %+v (%v)", got[3], got[3].Problem)
	}
	if !publication.IsProblem(got[2].Problem) || !publication.IsProblem(got[3].Problem) || publication.IsProblem(errors.New("connection refused")) {
		t.Errorf("IsProblem: a refusal and an answer are the reference's problems, a plain error is not")
	}
	if _, err := r.Head(ctx, "Not A Name"); err == nil {
		t.Errorf("a name that does not parse: no error")
	}
	if _, err := r.HeadAll(ctx, []string{tag.String(), "::"}); err == nil {
		t.Errorf("HeadAll with a name that does not parse: no error")
	}
	// What a refusal says when the client can name the credential.
	e := &publication.RefusedError{Host: "ghcr.io", Status: http.StatusUnauthorized, Credential: "user bot from $SWEBUILD_REGISTRY_AUTH"}
	if e.Error() != "login refused by ghcr.io (user bot from $SWEBUILD_REGISTRY_AUTH)" {
		t.Errorf("RefusedError = %q", e.Error())
	}
	// ReadIndex puts a refusal in the Index, like Head.
	x, err := r.ReadIndex(ctx, host+"/denied/sweb.eval.x:latest")
	if err != nil || !errors.As(x.Problem, &re) || x.Present {
		t.Errorf("ReadIndex of a denied name: %+v, %v", x, err)
	}
}

// TestResolve: an image name resolves to itself pinned by digest; an
// index to its image for the platform, or with no platform to its only
// image (its attestation manifest does not count); what is not there is
// ErrNotFound; a refusal is a *RefusedError.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	host := testRegistry(t, false)
	p := publication.Prefix{Repo: host + "/pub"}
	calc := newMultiArch(t)
	calc.publish(t, p, "fixture__calc-1")
	// An x86-only instance's index: one image and its attestation.
	only := ociImage(t)
	single := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: only, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: ociImage(t), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": digestOf(t, only).String()}}})
	singleTag, _ := name.NewTag(p.IndexName("fixture__textutil-2"), name.Insecure)
	if err := remote.WriteIndex(singleTag, single); err != nil {
		t.Fatal(err)
	}
	r := newReader(t)
	calcIndex := p.IndexName("fixture__calc-1")
	indexRepo := host + "/pub/sweb.eval.fixture_1776_calc-1"
	for _, tc := range []struct {
		name string
		ref  string
		p    core.Platform
		want v1.Image
		repo string
	}{
		{"per-arch name", p.ArchName("fixture__calc-1", core.ARM64), core.Platform{}, calc.arm64, host + "/pub/sweb.eval.arm64.fixture_1776_calc-1"},
		{"index, amd64", calcIndex, core.AMD64, calc.amd64, indexRepo},
		{"index, arm64", calcIndex, core.ARM64, calc.arm64, indexRepo},
		{"single-image index, no platform", singleTag.String(), core.Platform{}, only, host + "/pub/sweb.eval.fixture_1776_textutil-2"},
	} {
		res, err := r.Resolve(ctx, tc.ref, tc.p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		dg := digestOf(t, tc.want)
		raw, _ := tc.want.RawManifest()
		if res.Ref.String() != tc.repo+"@"+dg.String() || !bytes.Equal(res.Raw, raw) || res.Manifest == nil || len(res.Manifest.Layers) != 1 {
			t.Errorf("%s: resolved %s, want %s@%s", tc.name, res.Ref, tc.repo, dg)
		}
	}
	for _, tc := range []struct {
		name     string
		ref      string
		p        core.Platform
		notFound bool
		want     string
	}{
		{"no such name", host + "/pub/sweb.eval.fixture_1776_gone-1:latest", core.AMD64, true, ""},
		{"no arm64 image", singleTag.String(), core.ARM64, true, "no image for linux/arm64"},
		{"two images, no platform", calcIndex, core.Platform{}, false, "the index holds 2 image manifests; pick one with a platform"},
		{"denied", host + "/denied/x:latest", core.AMD64, false, "access denied by " + host},
	} {
		_, err := r.Resolve(ctx, tc.ref, tc.p)
		if err == nil || errors.Is(err, publication.ErrNotFound) != tc.notFound || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want not-found %v and %q", tc.name, err, tc.notFound, tc.want)
		}
	}
	// ResolveAll: each reference's own answer, in order.
	res, errs := r.ResolveAll(ctx, []string{calcIndex, host + "/pub/sweb.eval.fixture_1776_gone-1:latest"}, []core.Platform{core.ARM64, core.AMD64})
	if errs[0] != nil || res[0] == nil || res[0].Ref.DigestStr() != digestOf(t, calc.arm64).String() || res[1] != nil || !errors.Is(errs[1], publication.ErrNotFound) || !publication.IsProblem(errs[1]) {
		t.Errorf("ResolveAll: %+v, %v", res, errs)
	}
	// Image: the resolved image, its layers read through the client.
	img, err := r.Image(ctx, calcIndex, core.AMD64)
	if err != nil {
		t.Fatal(err)
	}
	if d := digestOf(t, img); d != digestOf(t, calc.amd64) {
		t.Errorf("Image digest %s, want amd64's %s", d, digestOf(t, calc.amd64))
	}
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers %v, %v", ls, err)
	}
	want, _ := calc.amd64.Layers()
	wd, _ := want[0].Digest()
	if ld, _ := ls[0].Digest(); ld != wd {
		t.Errorf("layer %s, want %s", ld, wd)
	}
	if _, err := r.Image(ctx, host+"/pub/sweb.eval.fixture_1776_gone-1:latest", core.AMD64); !errors.Is(err, publication.ErrNotFound) {
		t.Errorf("Image of a missing name: %v", err)
	}
}

// TestReadBlob: a blob is read whole and checked: refused over the limit
// (by its descriptor, and again while reading when the descriptor says
// less), refused when its bytes do not match its digest (naming the
// blob), ErrNotFound when the registry does not have it.
func TestReadBlob(t *testing.T) {
	ctx := context.Background()
	host := testRegistry(t, false)
	r := newReader(t)
	img := ociImage(t)
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"pub/x", "tamper/x"} {
		if err := remote.Write(repoOf(t, host+"/"+repo).Tag("latest"), img); err != nil {
			t.Fatal(err)
		}
	}
	repo := repoOf(t, host+"/pub/x")
	got, err := r.ReadBlob(ctx, repo, m.Config, 1<<20, "config")
	if err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("ReadBlob = %d bytes, %v; want the config's %d", len(got), err, len(cfg))
	}
	small := int64(len(cfg) - 1)
	if _, err := r.ReadBlob(ctx, repo, m.Config, small, "config"); err == nil || !strings.Contains(err.Error(), "more than") || !strings.Contains(err.Error(), m.Config.Digest.String()) {
		t.Errorf("over the limit by its descriptor: %v", err)
	}
	lying := m.Config
	lying.Size = 10
	if _, err := r.ReadBlob(ctx, repo, lying, 10, "config"); err == nil || !strings.Contains(err.Error(), "config "+m.Config.Digest.String()+": more than 10 bytes") {
		t.Errorf("over the limit while reading: %v", err)
	}
	// (The client's reader checks the digest as it reads.)
	if _, err := r.ReadBlob(ctx, repoOf(t, host+"/tamper/x"), m.Config, 1<<20, "document"); err == nil || !strings.HasPrefix(err.Error(), "reading document "+m.Config.Digest.String()+": ") ||
		!strings.Contains(err.Error(), "checksum") {
		t.Errorf("changed bytes: %v", err)
	}
	gone := v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("0", 64)}, Size: 10}
	if _, err := r.ReadBlob(ctx, repo, gone, 1<<20, "config"); !errors.Is(err, publication.ErrNotFound) {
		t.Errorf("a missing blob: %v", err)
	}
	if _, err := r.Manifest(ctx, repo.Tag("absent")); !errors.Is(err, publication.ErrNotFound) {
		t.Errorf("a missing manifest: %v", err)
	}
}

// TestReferrersBothWays: an artifact attached to an image is listed
// through the referrers API when the registry serves it, else through the
// fallback tag; with the fallback index emptied (another writer's
// overwrite), the artifact's own attachment tag still finds it.
func TestReferrersBothWays(t *testing.T) {
	ctx := context.Background()
	for _, api := range []bool{true, false} {
		host := testRegistry(t, api)
		r := newReader(t)
		repo := repoOf(t, host+"/pub/sweb.eval.x86_64.fixture_1776_calc-1")
		img := ociImage(t)
		if err := remote.Write(repo.Tag("latest"), img); err != nil {
			t.Fatal(err)
		}
		raw, _ := img.RawManifest()
		subject := v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: digestOf(t, img), Size: int64(len(raw))}
		a, err := attest.StatementArtifact(subject, attest.TestResultPredicate, []byte(`{"_type":"https://in-toto.io/Statement/v1","predicateType":"https://in-toto.io/attestation/test-result/v0.1"}`))
		if err != nil {
			t.Fatal(err)
		}
		w := &attest.Referrers{Client: r.Client, Settle: time.Millisecond}
		if err := w.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
		// (go-containerregistry's registry answers the referrers API with
		// the config's media type as artifactType, not the manifest's.)
		got, err := r.Referrers(ctx, repo, subject.Digest)
		if err != nil || len(got) != 1 || got[0].Digest != a.Descriptor.Digest || (!api && got[0].ArtifactType != a.Descriptor.ArtifactType) {
			t.Errorf("api %v: referrers %+v, %v; want %s", api, got, err, a.Descriptor.Digest)
		}
		if api {
			continue
		}
		emptyIndex := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
		if err := r.Client.Put(ctx, repo.Tag(publication.FallbackTag(subject.Digest)), rawIndex(emptyIndex)); err != nil {
			t.Fatal(err)
		}
		got, err = r.Referrers(ctx, repo, subject.Digest)
		if err != nil || len(got) != 1 || got[0].Digest != a.Descriptor.Digest || got[0].ArtifactType != a.Descriptor.ArtifactType {
			t.Errorf("fallback index emptied: referrers %+v, %v; want %s by its attachment tag", got, err, a.Descriptor.Digest)
		}
	}
}

// TestDescribe: a referrers index lists an artifact by its manifest's
// artifactType, else its config's media type (the distribution spec),
// with its digest, size and annotations; a manifest with no subject is
// no referrer.
func TestDescribe(t *testing.T) {
	subject := "sha256:" + strings.Repeat("c", 64)
	for _, tc := range []struct {
		name, raw, artifactType, mediaType, want string
	}{
		{"artifactType", `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"subject":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + subject + `","size":512},"annotations":{"org.opencontainers.image.created":"2026-12-02T03:00:00Z"}}`,
			"application/vnd.dev.sigstore.bundle.v0.3+json", "application/vnd.oci.image.manifest.v1+json", ""},
		{"config media type, no media type", `{"schemaVersion":2,"config":{"mediaType":"application/vnd.cyclonedx+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"subject":{"digest":"` + subject + `","size":512}}`,
			"application/vnd.cyclonedx+json", "application/vnd.oci.image.manifest.v1+json", ""},
		{"no subject", `{"schemaVersion":2,"config":{"mediaType":"application/vnd.cyclonedx+json"}}`, "", "", "the manifest has no subject"},
		{"not JSON", `{"schemaVersion":`, "", "", "decoding manifest"},
	} {
		d, sub, err := publication.Describe([]byte(tc.raw))
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
			}
			continue
		}
		h, n, _ := v1.SHA256(strings.NewReader(tc.raw))
		if err != nil || sub.String() != subject || d.Digest != h || d.Size != n || d.ArtifactType != tc.artifactType || string(d.MediaType) != tc.mediaType {
			t.Errorf("%s: %+v subject %s, %v", tc.name, d, sub, err)
		}
	}
}

// TestReadBounds: an index larger than the manifest limit is this
// reference's problem (a *registry.LimitError in the Index), not a
// failure of the read; a registry that cannot be reached is (the caller
// stops on it).
func TestReadBounds(t *testing.T) {
	ctx := context.Background()
	host := testRegistry(t, false)
	p := publication.Prefix{Repo: host + "/pub"}
	newMultiArch(t).publish(t, p, "fixture__calc-1")
	r := newReader(t)
	r.Limits = publication.Limits{ManifestBytes: 256}
	got, err := r.Read(ctx, p, []publication.Want{{ID: "fixture__calc-1", Platforms: []core.Platform{core.AMD64}}})
	if err != nil {
		t.Fatal(err)
	}
	x := got[0].Index
	if x.Present || x.Problem == nil || !publication.IsProblem(x.Problem) || !strings.Contains(x.Problem.Error(), "256") {
		t.Errorf("an index over the limit: %+v", x)
	}
	if _, err := r.Resolve(ctx, p.IndexName("fixture__calc-1"), core.AMD64); err == nil || !publication.IsProblem(err) {
		t.Errorf("resolving an index over the limit: %v", err)
	}

	// A port nothing listens on.
	srv := httptest.NewServer(http.NotFoundHandler())
	gone := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	c, err := registry.New(registry.Options{Keychain: regtest.Anonymous(), Budget: retry.Budget{Attempts: 1, MaxElapsed: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	down := publication.New(c)
	if _, err := down.Head(ctx, gone+"/pub/x:latest"); err == nil {
		t.Errorf("Head on a registry that is down: no error")
	}
	if _, err := down.Read(ctx, publication.Prefix{Repo: gone + "/pub"}, []publication.Want{{ID: "fixture__calc-1", Platforms: []core.Platform{core.AMD64}}}); err == nil {
		t.Errorf("Read on a registry that is down: no error")
	}
	if _, err := down.ReadIndex(ctx, gone+"/pub/sweb.eval.x:latest"); err == nil {
		t.Errorf("ReadIndex on a registry that is down: no error")
	}
	_, errs := down.ResolveAll(ctx, []string{gone + "/pub/x:latest"}, []core.Platform{core.AMD64})
	if errs[0] == nil || publication.IsProblem(errs[0]) {
		t.Errorf("ResolveAll on a registry that is down: %v, want an error that is not the reference's problem", errs[0])
	}
}
