package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/verify"
)

// TestOutputOCILayout is the end-to-end check of exports without a
// registry, on the offline fixture for amd64 and arm64:
//
//   - build --output type=oci,dest=DIR writes one OCI layout whose index.json
//     names every node's image by its key, at the digest the metadata file
//     records (oci_layout set, no ref), and beside each image its
//     provenance attestation and (env and instance images) its SBOM, as
//     referrers the records name;
//   - the same plan built with --push to a staging repository gets the same
//     digest for every node;
//   - publish from the layout's records and publish from the pushed records,
//     into two repositories of the stack's registry, write the same indexes:
//     same index digest, same children (platform and digest) for every
//     instance; so do publish --images oci:DIR (the layout alone) and
//     build --output --publish;
//   - verify runs gold patches from the layout (metadata records, and
//     --images oci:DIR) through BuildKit's oci-layout source;
//   - a build with neither --push nor --output says nothing was exported,
//     and publish and verify refuse its records saying how to export.
func TestOutputOCILayout(t *testing.T) {
	stacktest.Thorough(t)
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	prefix := fmt.Sprintf("%s/ocioutput%d", f.reg, time.Now().UnixNano())
	layoutDir := filepath.Join(tmp, "layout")

	build := func(md string, extra ...string) string {
		t.Helper()
		args := append([]string{"--dataset", f.dataset, "--specs", f.specs, "--metadata-file", md,
			"--run-dir", filepath.Join(tmp, "run-"+filepath.Base(md)), "--context-dir", f.rootfs, "--context-dir", f.ctxDir, "--progress", "quiet"}, extra...)
		var stdout, stderr bytes.Buffer
		err := runBuild(ctx, args, &stdout, &stderr)
		t.Logf("swebuild build %s:\n%s\n%s", strings.Join(extra, " "), stdout.String(), tail(stderr.String(), 3000))
		if err != nil {
			t.Fatalf("build %s: %v", strings.Join(extra, " "), err)
		}
		return stdout.String()
	}
	read := func(md string) map[string]core.Image {
		t.Helper()
		recs, err := core.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]core.Image{}
		for _, r := range recs {
			out[r.ID()] = r
		}
		return out
	}

	// 1. The layout.
	mdOCI := filepath.Join(tmp, "oci.jsonl")
	if out := build(mdOCI, "--output", "type=oci,dest="+layoutDir); !strings.Contains(out, "into the OCI layout "+layoutDir) {
		t.Errorf("the summary does not name the layout:\n%s", out)
	}
	oci := read(mdOCI)
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	inLayout := map[string]v1.Descriptor{} // key@platform
	// The images' referrers: BuildKit's attestation manifest and the SBOM
	// artifact, entries without a name naming their image's digest.
	referrers := map[string][]v1.Descriptor{} // image digest -> referrers
	images := 0
	for _, d := range im.Manifests {
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" {
			referrers[d.Annotations["vnd.docker.reference.digest"]] = append(referrers[d.Annotations["vnd.docker.reference.digest"]], d)
			continue
		}
		images++
		inLayout[ref+"@"+d.Platform.OS+"/"+d.Platform.Architecture] = d
	}
	if len(inLayout) != len(oci) || images != len(oci) {
		t.Errorf("layout index.json has %d image entries (%d names), the metadata file %d records", images, len(inLayout), len(oci))
	}
	attested, sboms := 0, 0
	for _, r := range oci {
		var att, doc bool
		for _, d := range referrers[r.Digest.String()] {
			att = att || (d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" && d.Digest.String() == r.Attestation.String())
			doc = doc || (d.ArtifactType == "application/vnd.cyclonedx+json" && d.Digest.String() == r.SBOM.String())
		}
		if r.Attestation == "" || !att {
			t.Errorf("record %s: attestation %q, named in index.json: %v", r.ID(), r.Attestation, att)
		} else {
			attested++
		}
		if r.SBOM != "" && doc {
			sboms++
		} else if r.SBOM != "" || r.Kind == core.KindInstance {
			t.Errorf("record %s: SBOM %q, named in index.json: %v", r.ID(), r.SBOM, doc)
		}
	}
	t.Logf("layout: %d/%d images with their provenance attestation, %d with their SBOM, beside them in index.json", attested, len(oci), sboms)
	instances := 0
	for _, r := range oci {
		d, ok := inLayout[r.Key+"@"+r.Platform.String()]
		switch {
		case !r.OK() || r.Ref != "" || r.OCILayout != layoutDir:
			t.Errorf("record %s: status %s, ref %q, oci_layout %q; want built, no ref, %s", r.ID(), r.Status, r.Ref, r.OCILayout, layoutDir)
		case !ok:
			t.Errorf("record %s: no index.json entry named %s for %s", r.ID(), r.Key, r.Platform)
		case d.Digest.String() != r.Digest.String():
			t.Errorf("record %s: index.json names %s, the record %s", r.ID(), d.Digest, r.Digest)
		}
		if r.Kind == core.KindInstance {
			instances++
			if d.Annotations[manifests.AnnotationInstanceID] != r.InstanceID {
				t.Errorf("record %s: index.json entry has instance id %q", r.ID(), d.Annotations[manifests.AnnotationInstanceID])
			}
			// Every blob of the image is in the layout.
			img, err := lp.Image(d.Digest)
			if err == nil {
				var layers []v1.Layer
				if layers, err = img.Layers(); err == nil {
					for _, l := range layers {
						rc, lerr := l.Compressed()
						if lerr != nil {
							err = lerr
							break
						}
						rc.Close()
					}
				}
			}
			if err != nil {
				t.Errorf("record %s: reading the image from the layout: %v", r.ID(), err)
			}
		}
	}
	if instances < 13 {
		t.Errorf("%d instance images in the layout, want the fixture's 13 (7 ids, one x86-only)", instances)
	}

	// 2. The same plan pushed: every instance image at the same digest.
	// Base and env images are only logged: an image's history times are
	// those of BuildKit's cache records of its layers, and on a daemon
	// shared with other builds a second record of the same base layer can
	// appear between two builds (seen once: the fixture's amd64 base config
	// differed only in "created"); such a difference reaches the instance
	// images, and so fails the test, only when their own records differ.
	mdPush := filepath.Join(tmp, "push.jsonl")
	build(mdPush, "--push", prefix+"/staging")
	pushed := read(mdPush)
	if len(pushed) != len(oci) {
		t.Errorf("pushed build: %d records, layout build %d", len(pushed), len(oci))
	}
	same := 0
	for id, r := range pushed {
		o := oci[id]
		switch {
		case r.Ref == "" || r.Digest == "":
			t.Errorf("%s: not pushed (ref %q)", id, r.Ref)
		case r.Digest == o.Digest:
			same++
		case r.Kind == core.KindInstance:
			t.Errorf("%s: pushed %s, layout %s", id, r.Digest, o.Digest)
		default:
			t.Logf("%s: pushed %s, layout %s (history times of BuildKit's cache records; not published)", id, r.Digest, o.Digest)
		}
	}
	t.Logf("%d/%d nodes at the same digest in the layout build and the pushed build", same, len(pushed))

	// 3. Publish both; the indexes are equal, child for child.
	publishTo := func(md, repo string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", repo, "--ledger", md + ".ledger"}, &stdout, &stderr)
		t.Logf("publish %s -> %s:\n%s\n%s", filepath.Base(md), repo, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
		if err != nil {
			t.Fatalf("publish %s: %v", md, err)
		}
	}
	publishTo(mdOCI, prefix+"/from-oci")
	publishTo(mdPush, prefix+"/from-push")
	ids := map[string]bool{}
	for _, r := range oci {
		if r.Kind == core.KindInstance {
			ids[r.InstanceID] = true
		}
	}
	equal := 0
	for id := range ids {
		a := children(t, ctx, manifests.Namer{Repo: prefix + "/from-oci"}.IndexRepo(id))
		b := children(t, ctx, manifests.Namer{Repo: prefix + "/from-push"}.IndexRepo(id))
		// Both builds carry BuildKit's provenance: one attestation
		// manifest per image in the index (unknown/unknown, as buildx lays
		// it out). The oci exporter's and the image exporter's attestation
		// manifests differ; the images themselves must be the same.
		aImgs, aAtt := imageChildren(a.children)
		imgs, att := imageChildren(b.children)
		if a.digest == "" || b.digest == "" || strings.Join(aImgs, " ") != strings.Join(imgs, " ") || att != len(imgs) || aAtt != len(aImgs) {
			t.Errorf("%s: index from the layout %s %v, from the pushed build %s %v (%d attestations)", id, a.digest, a.children, b.digest, b.children, att)
			continue
		}
		var want []string
		for _, r := range oci {
			if r.Kind == core.KindInstance && r.InstanceID == id {
				want = append(want, r.Platform.String()+"="+r.Digest.String())
			}
		}
		sort.Strings(want)
		if strings.Join(aImgs, " ") != strings.Join(want, " ") {
			t.Errorf("%s: index children %v, built %v", id, a.children, want)
			continue
		}
		equal++
	}
	t.Logf("%d/%d instance indexes with the same images (children by platform and digest) between publish from the layout and from the pushed build (each with one provenance attestation per image)", equal, len(ids))
	if equal != len(ids) || len(ids) != 7 {
		t.Errorf("%d/%d indexes equal; want all 7 fixture instances", equal, len(ids))
	}

	// 3a. publish --images oci:DIR: the layout alone (its index.json names
	// instance, spec key and base commit) gives the same indexes.
	{
		var stdout, stderr bytes.Buffer
		err := runPublish(ctx, []string{"--unsigned", "--images", "oci:" + layoutDir, "--repo", prefix + "/from-layout", "--ledger", filepath.Join(tmp, "layout.ledger")}, &stdout, &stderr)
		t.Logf("publish --images oci:%s:\n%s\n%s", layoutDir, tail(stdout.String(), 1500), tail(stderr.String(), 1500))
		if err != nil {
			t.Fatalf("publish --images oci:DIR: %v", err)
		}
	}
	fromLayout := 0
	for id := range ids {
		a := children(t, ctx, manifests.Namer{Repo: prefix + "/from-layout"}.IndexRepo(id))
		b := children(t, ctx, manifests.Namer{Repo: prefix + "/from-oci"}.IndexRepo(id))
		if a.digest != "" && a.digest == b.digest && strings.Join(a.children, " ") == strings.Join(b.children, " ") {
			fromLayout++
		}
	}
	t.Logf("publish --images oci:DIR: %d/%d indexes equal those published from the build's records (same images as the pushed build, above)", fromLayout, len(ids))
	if fromLayout != len(ids) {
		t.Errorf("publish --images oci:DIR: %d/%d indexes equal those published from the build's records", fromLayout, len(ids))
	}

	// 3b. build --output --publish publishes straight from the layout (every
	// node cached): the same indexes again.
	build(filepath.Join(tmp, "direct.jsonl"), "--output", "type=oci,dest="+filepath.Join(tmp, "layout2"), "--publish", prefix+"/direct", "--unsigned")
	direct := 0
	for id := range ids {
		a := children(t, ctx, manifests.Namer{Repo: prefix + "/direct"}.IndexRepo(id))
		b := children(t, ctx, manifests.Namer{Repo: prefix + "/from-oci"}.IndexRepo(id))
		// The second build's provenance is its own (its start and finish
		// times): the images must be the same, each with an attestation.
		aImgs, aAtt := imageChildren(a.children)
		bImgs, _ := imageChildren(b.children)
		if a.digest != "" && len(aImgs) > 0 && aAtt == len(aImgs) && strings.Join(aImgs, " ") == strings.Join(bImgs, " ") {
			direct++
		}
	}
	if direct != len(ids) {
		t.Errorf("build --output --publish: %d/%d indexes with the same images (each attested) as those published from the layout build's records", direct, len(ids))
	}

	// 4. Verify from the layout: metadata records (both platforms) and
	// --images oci:DIR.
	for _, src := range [][]string{
		{"--metadata-file", mdOCI, "--instance", "fixture__calc-1", "--platform", "linux/amd64,linux/arm64"},
		{"--images", "oci:" + layoutDir, "--instance", "fixture__semver-1", "--platform", "linux/amd64"},
	} {
		sumFile := filepath.Join(tmp, "verify-"+src[0][2:]+".json")
		var stdout, stderr bytes.Buffer
		args := append([]string{"--gold", "--dataset", f.dataset, "--specs", f.specs, "--run-dir", filepath.Join(tmp, "verify-"+src[0][2:]), "--summary", sumFile}, src...)
		err := runVerify(ctx, args, &stdout, &stderr)
		t.Logf("verify %v:\n%s\n%s", src, stdout.String(), tail(stderr.String(), 2000))
		if err != nil {
			t.Errorf("verify %v: %v", src, err)
			continue
		}
		sum, err := verify.ReadSummary(sumFile)
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if src[0] == "--images" {
			want = 1
		}
		ok := 0
		for _, r := range sum.Results {
			if r.Resolved && r.OK() {
				ok++
			}
		}
		if ok != want || len(sum.Results) != want {
			t.Errorf("verify %v: %d of %d results resolved, want %d", src, ok, len(sum.Results), want)
		}
	}

	// 5. Neither --push nor --output: nothing exported, and said so.
	mdNone := filepath.Join(tmp, "none.jsonl")
	if out := build(mdNone, "--instance", "fixture__calc-1", "--platform", "linux/amd64"); !strings.Contains(out, "nothing exported") || !strings.Contains(out, "--output type=oci,dest=DIR") {
		t.Errorf("a build exporting nothing does not say so:\n%s", out)
	}
	var stdout, stderr bytes.Buffer
	err = runPublish(ctx, []string{"--unsigned", "--metadata-file", mdNone, "--repo", prefix + "/none", "--ledger", mdNone + ".ledger"}, &stdout, &stderr)
	if err == nil || !strings.Contains(stdout.String(), "nothing to publish from") || !strings.Contains(stdout.String(), "--push REPO") {
		t.Errorf("publish of records with no ref and no layout: err %v, output:\n%s", err, stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	err = runVerify(ctx, []string{"--gold", "--dataset", f.dataset, "--specs", f.specs, "--metadata-file", mdNone, "--instance", "fixture__calc-1", "--platform", "linux/amd64", "--run-dir", filepath.Join(tmp, "verify-none")}, &stdout, &stderr)
	if err == nil || !strings.Contains(stderr.String(), "was not exported") {
		t.Errorf("verify of records with no ref and no layout: err %v, stderr:\n%s", err, stderr.String())
	}
}

type indexChildren struct {
	digest   string
	children []string // platform=digest, sorted
}

// children reads the index under repo:latest from the stack's registry.
func children(t *testing.T, ctx context.Context, repo string) indexChildren {
	t.Helper()
	ref, err := name.ParseReference(repo+":"+manifests.LatestTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref, remote.WithContext(ctx))
	if err != nil {
		t.Errorf("%s: %v", ref, err)
		return indexChildren{}
	}
	dg, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := indexChildren{digest: dg.String()}
	for _, d := range m.Manifests {
		out.children = append(out.children, d.Platform.OS+"/"+d.Platform.Architecture+"="+d.Digest.String())
	}
	sort.Strings(out.children)
	return out
}

func TestPublishImagesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--images", "127.0.0.1:5000/x", "--repo", "127.0.0.1:5000/r"}, "want oci:DIR"},
		{[]string{"--images", "oci:", "--repo", "127.0.0.1:5000/r"}, "want oci:DIR"},
		{[]string{"--images", "oci:/x", "--metadata-file", "m.jsonl", "--repo", "127.0.0.1:5000/r"}, "give one of --metadata-file and --images"},
		{[]string{"--repo", "127.0.0.1:5000/r"}, "--metadata-file is required (or --images oci:DIR)"},
	} {
		var stdout, stderr bytes.Buffer
		err := runPublish(context.Background(), tc.args, &stdout, &stderr)
		if err != errUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: err %v, stderr %q; want a usage error with %q", tc.args, err, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	err := runPublish(context.Background(), []string{"--unsigned", "--images", "oci:" + filepath.Join(t.TempDir(), "missing"), "--repo", "127.0.0.1:5000/r"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "opening OCI layout") {
		t.Errorf("a missing layout: %v", err)
	}
}

// imageChildren are an index's children less its attestation manifests
// (platform unknown/unknown), and how many of those there were.
func imageChildren(children []string) (imgs []string, attestations int) {
	for _, c := range children {
		if strings.HasPrefix(c, "unknown/unknown=") {
			attestations++
			continue
		}
		imgs = append(imgs, c)
	}
	return imgs, attestations
}
