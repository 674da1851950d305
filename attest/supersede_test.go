package attest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/internal/regtest"
)

func hashOf(t testing.TB, hex string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash("sha256:" + hex)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSuperseded: the filter keeps one referrer per kind the build
// attached, and leaves kinds the build did not attach alone.
func TestSuperseded(t *testing.T) {
	const (
		provType = "application/vnd.docker.attestation.manifest.v1+json"
		sbomType = "application/vnd.cyclonedx+json"
		sigType  = "application/vnd.dev.cosign.artifact.sig.v1+json"
	)
	d := func(hex, at, predicate string) v1.Descriptor {
		desc := v1.Descriptor{Digest: hashOf(t, hex), ArtifactType: at}
		if predicate != "" {
			desc.Annotations = map[string]string{AnnotationPredicateType: predicate}
		}
		return desc
	}
	hex := func(c byte) string { return string(slices.Repeat([]byte{c}, 64)) }
	oldProv, newProv := d(hex('1'), provType, ""), d(hex('2'), provType, "")
	oldSBOM, newSBOM := d(hex('3'), sbomType, ""), d(hex('4'), sbomType, "")
	oldTest, newTest := d(hex('5'), StatementMediaType, TestResultPredicate), d(hex('6'), StatementMediaType, TestResultPredicate)
	otherStmt := d(hex('7'), StatementMediaType, "https://slsa.dev/verification_summary/v1")
	// A statement attached before entries named their predicate.
	unnamed := d(hex('a'), StatementMediaType, "")
	sig := d(hex('8'), sigType, "")
	all := []v1.Descriptor{oldProv, newProv, oldSBOM, newSBOM, oldTest, newTest, otherStmt, sig, unnamed}
	for _, tc := range []struct {
		name string
		keep []v1.Descriptor
		want []v1.Descriptor
	}{
		{"the new build's three", []v1.Descriptor{newProv, newSBOM, newTest}, []v1.Descriptor{oldProv, oldSBOM, oldTest, unnamed}},
		{"same SBOM both builds", []v1.Descriptor{newProv, oldSBOM, newTest}, []v1.Descriptor{oldProv, newSBOM, oldTest, unnamed}},
		{"no statement this time", []v1.Descriptor{newProv, newSBOM}, []v1.Descriptor{oldProv, oldSBOM}},
		{"nothing kept", nil, nil},
		{"kept digest not listed", []v1.Descriptor{d(hex('9'), provType, "")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keep []v1.Hash
			for _, k := range tc.keep {
				keep = append(keep, k.Digest)
			}
			got := Superseded(all, keep)
			if !slices.EqualFunc(got, tc.want, func(a, b v1.Descriptor) bool { return a.Digest == b.Digest }) {
				t.Errorf("Superseded = %v, want %v", digests(got), digests(tc.want))
			}
		})
	}
}

func digests(ds []v1.Descriptor) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Digest.Hex[:4])
	}
	return out
}

// TestSupersede: on distribution 2.8, two builds of one digest attach
// their statements; superseding keeps the second's only, in the fallback
// index skopeo and go-containerregistry read and in List (the first's
// attachment tag answers a tombstone), leaves a kind the build did not
// attach alone, and a later Attach of the first brings it back.
func TestSupersede(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	repo, _ := name.NewRepository(reg.Host+"/supersede/img", name.Insecure)
	subject := regtest.PushRandomImage(t, repo, 512, 2)
	r := &Referrers{Client: newClient(t, nil), Settle: 10 * time.Millisecond}
	first, second := statement(t, subject, 1), statement(t, subject, 2)
	other, err := NewArtifact(subject, "application/vnd.example.signature", "application/vnd.example.signature", []byte("sig"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Artifact{first, other, second} {
		if err := r.Attach(ctx, repo, a); err != nil {
			t.Fatal(err)
		}
	}
	gone, err := r.Supersede(ctx, repo, subject.Digest, []v1.Hash{second.Descriptor.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].Digest != first.Descriptor.Digest {
		t.Fatalf("superseded %v, want the first statement %s", digests(gone), first.Descriptor.Digest.Hex[:4])
	}
	want := []v1.Hash{other.Descriptor.Digest, second.Descriptor.Digest}
	slices.SortFunc(want, func(a, b v1.Hash) int { return strings.Compare(a.String(), b.String()) })
	idx, err := remote.Referrers(repo.Digest(subject.Digest.String()))
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if got := hashes(im.Manifests); !slices.Equal(got, want) {
		t.Errorf("fallback index (go-containerregistry): %v, want %v", got, want)
	}
	list, err := r.List(ctx, repo, subject.Digest)
	if err != nil || !slices.Equal(hashes(list), want) {
		t.Errorf("List: %v %v, want %v", hashes(list), err, want)
	}
	if ok, err := r.Attached(ctx, repo, subject.Digest, first.Descriptor.Digest); err != nil || ok {
		t.Errorf("Attached(first) = %v, %v after it was superseded", ok, err)
	}
	// A second Supersede finds nothing to do.
	if again, err := r.Supersede(ctx, repo, subject.Digest, []v1.Hash{second.Descriptor.Digest}); err != nil || len(again) != 0 {
		t.Errorf("second Supersede: %v %v", digests(again), err)
	}
	// The first build published again: its statement is back.
	if attached, err := r.AttachOnce(ctx, repo, first); err != nil || !attached {
		t.Fatalf("AttachOnce(first) = %v, %v", attached, err)
	}
	list, err = r.List(ctx, repo, subject.Digest)
	if err != nil || !slices.Contains(hashes(list), first.Descriptor.Digest) {
		t.Errorf("List after attaching the first again: %v %v", hashes(list), err)
	}
}

func hashes(ds []v1.Descriptor) []v1.Hash {
	var out []v1.Hash
	for _, d := range ds {
		out = append(out, d.Digest)
	}
	return out
}
