package check

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/sign"
)

// Digests as a registry reports them (64 hex digits), made up: the catalog
// copies them, it does not compute them.
const (
	dgCalcAMD64  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	dgCalcARM64  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	dgCalcIndex  = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	dgTextAMD64  = "sha256:4444444444444444444444444444444444444444444444444444444444444444"
	dgCalcRecord = "sha256:5555555555555555555555555555555555555555555555555555555555555555"
)

// catalogReport is a check of two fixture instances under
// 127.0.0.1:5000/swebench: fixture__calc-1 complete on both platforms with
// its record's image, fixture__textutil-2 (x86-only) with its index
// missing: 5 of the 6 references present.
func catalogReport() *Report {
	return &Report{
		Instances: 2,
		Refs: []Ref{
			{Kind: KindArch, InstanceID: "fixture__calc-1", Platform: core.AMD64, Name: "127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture_1776_calc-1:latest", Present: true, Digest: dgCalcAMD64},
			{Kind: KindArch, InstanceID: "fixture__calc-1", Platform: core.ARM64, Name: "127.0.0.1:5000/swebench/sweb.eval.arm64.fixture_1776_calc-1:latest", Present: true, Digest: dgCalcARM64},
			{Kind: KindIndex, InstanceID: "fixture__calc-1", Name: "127.0.0.1:5000/swebench/sweb.eval.fixture_1776_calc-1:latest", Present: true, Digest: dgCalcIndex},
			{Kind: KindRecord, InstanceID: "fixture__calc-1", Name: "127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture__calc-1:latest", Present: true, Digest: dgCalcRecord},
			{Kind: KindArch, InstanceID: "fixture__textutil-2", Platform: core.AMD64, Name: "127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture_1776_textutil-2:latest", Present: true, Digest: dgTextAMD64},
			{Kind: KindIndex, InstanceID: "fixture__textutil-2", Name: "127.0.0.1:5000/swebench/sweb.eval.fixture_1776_textutil-2:latest", Problem: "missing"},
		},
	}
}

func newSigner(t *testing.T) (*sign.Signer, sign.Trust) {
	t.Helper()
	key, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewKeySigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s, sign.Trust{Key: &key.PublicKey}
}

// TestCatalogFileSignedRoundTrip: check --digests FILE writes one JSON line
// per instance (the digests found, a missing index left out) and, with a
// signing key, FILE.sigstore.json beside it; check --verify-digests FILE
// verifies it with the public key and says what the statement catalogs:
// the dataset, repository and tag, the instance and reference counts, and
// whether the verified gate ran.
func TestCatalogFileSignedRoundTrip(t *testing.T) {
	ctx := context.Background()
	signer, trust := newSigner(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "digests.jsonl")
	const dataset = "testdata/fixture/dataset.jsonl"
	o := Options{Repo: "127.0.0.1:5000/swebench"}
	var out bytes.Buffer
	if err := catalogReport().WriteCatalogFile(ctx, path, signer, dataset, o, &out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"instance_id":"fixture__calc-1","index":"` + dgCalcIndex + `","platforms":{"linux/amd64":"` + dgCalcAMD64 + `","linux/arm64":"` + dgCalcARM64 + `"},` +
		`"record_image":"` + dgCalcRecord + `","record_ref":"127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture__calc-1:latest"}` + "\n" +
		`{"instance_id":"fixture__textutil-2","platforms":{"linux/amd64":"` + dgTextAMD64 + `"}}` + "\n"
	if string(got) != want {
		t.Errorf("catalog file:\n%s\nwant:\n%s", got, want)
	}
	bundle := path + ".sigstore.json"
	if CatalogBundle(path) != bundle {
		t.Errorf("CatalogBundle(%s) = %s, want %s (cosign sign-blob --bundle's name)", path, CatalogBundle(path), bundle)
	}
	if _, err := os.Stat(bundle); err != nil {
		t.Fatalf("no bundle beside the catalog: %v", err)
	}
	if msg := "digest catalog " + path + " signed by " + trust.Name() + ": " + bundle + "\n"; out.String() != msg {
		t.Errorf("said %q, want %q", out.String(), msg)
	}

	// The statement's subject is the file, by name and sha256.
	info, err := sign.BundleSubjects(mustRead(t, bundle))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(got)
	if info.PredicateType != CatalogPredicate || len(info.Subjects) != 1 || info.Subjects[0].Name != "digests.jsonl" || info.Subjects[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("signed statement: %+v, want a %s about digests.jsonl sha256 %x", info, CatalogPredicate, sum)
	}

	out.Reset()
	if err := VerifyCatalogFile(trust, path, &out); err != nil {
		t.Fatal(err)
	}
	wantLine := path + ": signed by " + trust.Name() + ": the digest catalog of " + dataset +
		" in 127.0.0.1:5000/swebench:latest, 2 instances, 5/6 references present, not gated (written without --require-verified)\n"
	if out.String() != wantLine {
		t.Errorf("verify said:\n%q\nwant:\n%q", out.String(), wantLine)
	}
}

// TestCatalogGated: with --require-verified the statement counts the
// images the gate passed, and names the platforms --platform narrowed to
// and the tag checked.
func TestCatalogGated(t *testing.T) {
	r := catalogReport()
	r.Platforms = []core.Platform{core.AMD64}
	r.Trusted = "key abc"
	r.Receipts = []Receipt{
		{InstanceID: "fixture__calc-1", Platform: core.AMD64, Image: "127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture_1776_calc-1@" + dgCalcAMD64, Result: "PASSED", Runs: 1},
		{InstanceID: "fixture__textutil-2", Platform: core.AMD64, Image: "127.0.0.1:5000/swebench/sweb.eval.x86_64.fixture_1776_textutil-2@" + dgTextAMD64, Problem: "no signed verification statement"},
	}
	signer, trust := newSigner(t)
	path := filepath.Join(t.TempDir(), "catalog.jsonl")
	o := Options{Repo: "127.0.0.1:5000/swebench", Tag: "nightly-2026-12-01"}
	if err := r.WriteCatalogFile(context.Background(), path, signer, "SWE-bench/SWE-bench_Verified@abc123:test", o, io.Discard); err != nil {
		t.Fatal(err)
	}
	info, err := VerifyCatalog(trust, mustRead(t, path), mustRead(t, CatalogBundle(path)))
	if err != nil {
		t.Fatal(err)
	}
	want := CatalogInfo{Dataset: "SWE-bench/SWE-bench_Verified@abc123:test", Repo: "127.0.0.1:5000/swebench", Tag: "nightly-2026-12-01",
		Platforms: []string{"linux/amd64"}, Instances: 2, Present: 5, References: 6, Verified: 1}
	if info.Dataset != want.Dataset || info.Repo != want.Repo || info.Tag != want.Tag || strings.Join(info.Platforms, ",") != "linux/amd64" ||
		info.Instances != want.Instances || info.Present != want.Present || info.References != want.References || info.Verified != want.Verified {
		t.Errorf("catalog info %+v, want %+v", *info, want)
	}
	var out bytes.Buffer
	if err := VerifyCatalogFile(trust, path, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "5/6 references present, 1 verified images\n") || !strings.Contains(out.String(), "in 127.0.0.1:5000/swebench:nightly-2026-12-01,") {
		t.Errorf("verify said %q", out.String())
	}
}

// TestCatalogFileRefused: what --verify-digests refuses, each error naming
// the file or the signature: a file changed after it was signed, a file
// whose signature is missing, a signature by another key, a signed
// statement that is not a digest catalog, a missing file. Without a
// signer no bundle is written; a file that cannot be written is an error.
func TestCatalogFileRefused(t *testing.T) {
	ctx := context.Background()
	signer, trust := newSigner(t)
	_, otherTrust := newSigner(t)
	o := Options{Repo: "127.0.0.1:5000/swebench"}
	signed := func(t *testing.T) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "digests.jsonl")
		if err := catalogReport().WriteCatalogFile(ctx, path, signer, "fixture", o, io.Discard); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (file string, trust sign.Trust)
		want  []string
	}{
		{"changed after signing", func(t *testing.T) (string, sign.Trust) {
			path := signed(t)
			raw := mustRead(t, path)
			// The index digest of textutil-2 added by hand.
			raw = bytes.Replace(raw, []byte(`{"instance_id":"fixture__textutil-2",`), []byte(`{"instance_id":"fixture__textutil-2","index":"`+dgCalcIndex+`",`), 1)
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			return path, trust
		}, []string{"digests.jsonl: the file is not the one signed", "it changed after it was signed"}},
		{"no signature", func(t *testing.T) (string, sign.Trust) {
			path := signed(t)
			if err := os.Remove(CatalogBundle(path)); err != nil {
				t.Fatal(err)
			}
			return path, trust
		}, []string{"the catalog's signature", "digests.jsonl.sigstore.json"}},
		{"another key", func(t *testing.T) (string, sign.Trust) {
			return signed(t), otherTrust
		}, []string{"digests.jsonl: ", "does not verify with " + otherTrust.Name()}},
		{"not a catalog statement", func(t *testing.T) (string, sign.Trust) {
			path := signed(t)
			raw := mustRead(t, path)
			sum := sha256.Sum256(raw)
			st, err := sign.Statement("digests.jsonl", hex.EncodeToString(sum[:]), "https://slsa.dev/provenance/v1", []byte(`{"buildType":"x"}`))
			if err != nil {
				t.Fatal(err)
			}
			bundle, _, err := signer.Sign(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(CatalogBundle(path), bundle, 0o644); err != nil {
				t.Fatal(err)
			}
			return path, trust
		}, []string{"the signed statement is a https://slsa.dev/provenance/v1, not a digest catalog (" + CatalogPredicate + ")"}},
		{"no file", func(t *testing.T) (string, sign.Trust) {
			return filepath.Join(t.TempDir(), "absent.jsonl"), trust
		}, []string{"absent.jsonl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, tr := tc.setup(t)
			var out bytes.Buffer
			err := VerifyCatalogFile(tr, file, &out)
			if err == nil {
				t.Fatalf("verified (%q), want an error", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to say %q", err, w)
				}
			}
			if out.Len() != 0 {
				t.Errorf("said %q for a refused catalog", out.String())
			}
		})
	}

	t.Run("unsigned", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "digests.jsonl")
		var out bytes.Buffer
		if err := catalogReport().WriteCatalogFile(ctx, path, nil, "fixture", o, &out); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(CatalogBundle(path)); !os.IsNotExist(err) {
			t.Errorf("a bundle without a signer: %v", err)
		}
		if out.Len() != 0 {
			t.Errorf("said %q without a signer", out.String())
		}
		if err := VerifyCatalogFile(trust, path, &out); err == nil || !strings.Contains(err.Error(), "the catalog's signature") {
			t.Errorf("verifying an unsigned catalog: %v", err)
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no-such-dir", "digests.jsonl")
		if err := catalogReport().WriteCatalogFile(ctx, path, signer, "fixture", o, io.Discard); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
			t.Errorf("writing into a missing directory: %v", err)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
