package drift

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/pins"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// TestFetchFromReferrers: documents attached through the referrers tag
// schema on a distribution 2.8 registry (no referrers API) are read back;
// an image with none gets no document; an unreadable one fails naming the
// image; --save writes what pins.ReadFrozen reads.
func TestFetchFromReferrers(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := registry.New(registry.Options{MaxRPS: -1, Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client, Settle: 10 * time.Millisecond}
	repo, err := name.NewRepository(reg.Host+"/pub/sweb.env.fixture.x86_64.calc", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	attach := func(subject v1.Descriptor, payload []byte) v1.Hash {
		t.Helper()
		a, err := attest.NewArtifact(subject, sbom.MediaType, sbom.MediaType, payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := refs.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
		return a.Descriptor.Digest
	}
	withDoc, noDoc, badDoc := regtest.PushRandomImage(t, repo, 256, 1), regtest.PushRandomImage(t, repo, 256, 1), regtest.PushRandomImage(t, repo, 256, 1)
	want := &sbom.Document{Subject: withDoc.Digest.String(), Kind: "env", Image: "sweb.env.fixture.x86_64.calc",
		Platform: core.AMD64, Repo: "fixture/calc", Version: "1.0", InstanceIDs: []string{"fixture__calc-1", "fixture__calc-2"},
		Packages: listing(t, "fixdep==1.0")}
	raw, err := want.CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	artifact := attach(withDoc, raw)
	attach(withDoc, raw) // attached again (a second push of one image): one document
	// A BuildKit-style statement on noDoc is not an environment document.
	st, err := attest.StatementArtifact(noDoc, attest.TestResultPredicate, []byte(`{"_type":"https://in-toto.io/Statement/v1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := refs.Attach(ctx, repo, st); err != nil {
		t.Fatal(err)
	}
	badArtifact := attach(badDoc, []byte(`{"bomFormat":"not CycloneDX"`))

	target := func(d v1.Descriptor, n string) Target {
		return Target{Kind: KindEnv, Name: n, Platform: core.AMD64, Ref: repo.Digest(d.Digest.String()).String()}
	}
	save := t.TempDir()
	f := &Fetcher{Reader: publication.New(client), Save: save}
	got, err := f.Fetch(ctx, []Target{target(withDoc, "with"), target(noDoc, "none")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Doc == nil || got[1].Doc != nil {
		t.Fatalf("documents: with=%v none=%v", got[0].Doc != nil, got[1].Doc != nil)
	}
	if d := got[0].Doc; d.Subject != want.Subject || len(d.Packages) != len(want.Packages) || d.Repo != "fixture/calc" {
		t.Errorf("document read back = %+v", d)
	}
	if c := Diff(want.Packages, got[0].Doc.Packages); len(c) != 0 {
		t.Errorf("packages read back differ: %v", c)
	}
	files, _ := filepath.Glob(filepath.Join(save, "*.json"))
	if len(files) != 1 || filepath.Base(files[0]) != "env.with.linux-amd64.cdx.json" {
		t.Fatalf("saved %v", files)
	}
	docs, err := pins.ReadFrozen(context.Background(), save)
	if err != nil || len(docs) != 1 || docs[0].Subject != want.Subject {
		t.Fatalf("ReadFrozen = %v, %v", docs, err)
	}

	// The record names the artifact: read directly, and only when it is a
	// referrer of the image.
	direct := target(withDoc, "with")
	direct.SBOM = artifact.String()
	got, err = (&Fetcher{Reader: publication.New(client)}).Fetch(ctx, []Target{direct})
	if err != nil || got[0].Doc == nil || got[0].Doc.Subject != want.Subject {
		t.Fatalf("direct read: %+v, %v", got, err)
	}
	direct.SBOM = badArtifact.String()
	if _, err := (&Fetcher{Reader: publication.New(client)}).Fetch(ctx, []Target{direct}); err == nil || !strings.Contains(err.Error(), "is not a referrer of") {
		t.Errorf("a record naming another image's artifact: err = %v", err)
	}

	_, err = (&Fetcher{Reader: publication.New(client)}).Fetch(ctx, []Target{target(withDoc, "with"), target(badDoc, "broken")})
	if err == nil || !strings.Contains(err.Error(), "env broken linux/amd64") || !strings.Contains(err.Error(), badDoc.Digest.String()) {
		t.Errorf("an unreadable document: err = %v, want one naming env broken and %s", err, badDoc.Digest)
	}
}

func TestTargetsFromRecords(t *testing.T) {
	recs := []core.Image{
		{Kind: core.KindBase, Key: "sweb.base.fixture.x86_64:latest", Platform: core.AMD64, Ref: "r/b@sha256:1", Status: core.StatusBuilt},
		{Kind: core.KindEnv, Key: "sweb.env.fixture.x86_64.abc:latest", Platform: core.AMD64, Ref: "r/e@sha256:2", Status: core.StatusBuilt},
		{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Ref: "r/i@sha256:3", Status: core.StatusBuilt},
		{Kind: core.KindInstance, InstanceID: "fixture__calc-2", Platform: core.AMD64, Status: core.StatusFailed, Error: "x"},
		{Kind: core.KindIndex, InstanceID: "fixture__calc-1", Ref: "r/x@sha256:4", Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Ref: "r/i@sha256:5", Status: core.StatusPublished},
	}
	got, err := TargetsFromRecords("m.jsonl", recs)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]Target{
		{Kind: KindEnv, Name: "sweb.env.fixture.x86_64.abc", Platform: core.AMD64, Ref: "r/e@sha256:2"},
		{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: "r/i@sha256:5"},
	})
	if fmt.Sprint(got) != want {
		t.Errorf("targets = %v\nwant %v", got, want)
	}
	why, err := TargetsFromRecords("m.jsonl", []core.Image{{Kind: core.KindEnv, Key: "k:latest", Platform: core.AMD64, Ref: "r/e@sha256:2", Status: core.StatusBuilt, SBOMError: "dpkg-query: exit 2"}})
	if err != nil || len(why) != 1 || why[0].Why != "dpkg-query: exit 2" {
		t.Errorf("a record whose capture failed: %+v, %v", why, err)
	}
	_, err = TargetsFromRecords("m.jsonl", []core.Image{{Kind: core.KindEnv, Key: "k:latest", Platform: core.AMD64, Status: core.StatusBuilt, OCILayout: "/x"}})
	if err == nil || !strings.Contains(err.Error(), "m.jsonl: env k linux/amd64") {
		t.Errorf("a record with no ref: err = %v", err)
	}
}

// TestFetchSelfLinkingTagList (issue 28: a registry whose tag list links
// to itself for ever made drift loop to 2.7 GB): an image whose record
// names no document has its referrers listed, on a registry without the
// referrers API through its tag list; a tag list linking back to itself
// fails the fetch at once, naming the image and the listing.
func TestFetchSelfLinkingTagList(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	up, err := name.NewRepository(reg.Host+"/loop/sweb.eval.x86_64.fixture_1776_calc-1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img := regtest.PushRandomImage(t, up, 128, 1)
	px := regtest.StartProxy(t, reg.Host, func(resp *http.Response) error {
		if strings.HasSuffix(resp.Request.URL.Path, "/tags/list") {
			resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
			resp.Header.Set("Link", "<"+resp.Request.URL.RequestURI()+`>; rel="next"`)
		}
		return nil
	})
	client, err := registry.New(registry.Options{Keychain: regtest.Anonymous()})
	if err != nil {
		t.Fatal(err)
	}
	ref := px.Host + "/loop/sweb.eval.x86_64.fixture_1776_calc-1@" + img.Digest.String()
	_, err = (&Fetcher{Reader: publication.New(client)}).Fetch(ctx, []Target{{Kind: KindInstance, Name: "fixture__calc-1", Platform: core.AMD64, Ref: ref}})
	if err == nil || !strings.Contains(err.Error(), "instance fixture__calc-1 linux/amd64") || !strings.Contains(err.Error(), "links back to") {
		t.Fatalf("err = %v, want one naming the image and the self-link", err)
	}
	n := 0
	for k, c := range px.Requests() {
		if strings.HasSuffix(k, "/tags/list") {
			n += c
		}
	}
	if n != 1 {
		t.Errorf("%d tag list requests, want 1", n)
	}
	t.Log(err)
}
