package pipeline

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
)

// TestMatrixSkipsBySpecKeyAndRegistry: the nightly's matrix reuses a
// ledger image only when it was built from the inputs the build would use
// now (spec key) and lives in the repository the run publishes to. Two
// Verified instances, linux/amd64: a ledger written with the keys of
// --pins none is reused by a --pins none matrix, not by a default-pins one
// (conda-channels-tos changes every Python base Dockerfile, so every spec
// key); a record naming another registry is rebuilt.
func TestMatrixSkipsBySpecKeyAndRegistry(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Verified", "test.jsonl")
	ids := []string{"astropy__astropy-12907", "django__django-11099"}
	const repo = "127.0.0.1:5000/swebench"
	dir := t.TempDir()
	opts := func(pins string) MatrixOptions {
		return MatrixOptions{
			Inputs:   Inputs{Dataset: ds, Instances: ids, Pins: pins, CacheDir: dir, Offline: true},
			Matrix:   ci.MatrixOptions{Platforms: []string{core.AMD64.String()}, Shards: 2},
			Ledger:   filepath.Join(dir, "ledger.jsonl"),
			SkipRepo: repo,
		}
	}
	// What a build with --pins none records (the keys compared).
	o := opts("none")
	loaded, _, _, _, err := o.instances(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := o.specKeys(context.Background(), loaded, nil)
	if len(keys) != 2 {
		t.Fatalf("spec keys %v", keys)
	}
	var ledger []core.Image
	var refs []string
	for i, id := range ids {
		d := digest.FromString(id)
		ref := repo + "/sweb.eval.x86_64." + id + "@" + d.String()
		if i == 1 {
			ref = "ghcr.io/elsewhere/sweb.eval.x86_64." + id + "@" + d.String()
		}
		refs = append(refs, ref)
		ledger = append(ledger, core.Image{Kind: core.KindInstance, InstanceID: id, Platform: core.AMD64, Digest: d, Ref: ref,
			SpecKey: keys[ci.Key{InstanceID: id, Platform: core.AMD64.String()}], Verified: core.Bool(true), Status: core.StatusPublished})
	}
	if err := core.WriteFile(o.Ledger, ledger); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pins    string
		skipped int
	}{
		{"none", 1},    // the first; the second names another registry
		{"default", 0}, // spec keys changed
	} {
		o := opts(tc.pins)
		o.Checker = ci.NewMapChecker(refs...) // the registry holds every digest
		var log bytes.Buffer
		o.Log = &log
		m, _, err := Matrix(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Counts) != 1 || m.Counts[0].Skipped != tc.skipped || m.Counts[0].ToBuild != 2-tc.skipped {
			t.Errorf("--pins %s: counts %+v, want %d skipped", tc.pins, m.Counts, tc.skipped)
		}
		if strings.Contains(log.String(), "not compared") {
			t.Errorf("--pins %s: %s", tc.pins, log.String())
		}
	}
}
