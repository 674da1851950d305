package ci

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// TestSkipExistingRealRegistry pushes an image to a real registry, records
// it in a publish ledger, and checks the next matrix skips exactly the images
// whose digest the registry holds.
func TestSkipExistingRealRegistry(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{})
	ctx := context.Background()
	repo := reg.Host + "/swebench/sweb.eval.x86_64.a_1776_a-1"
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(repo + ":k-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("pushing test image: %v", err)
	}
	dig, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	client, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chk := ClientChecker{Client: client}
	if ok, err := chk.HasDigest(ctx, repo, dig.String()); err != nil || !ok {
		t.Fatalf("HasDigest(pushed) = %v, %v", ok, err)
	}
	if ok, err := chk.HasDigest(ctx, repo, dA); err != nil || ok {
		t.Fatalf("HasDigest(absent) = %v, %v", ok, err)
	}

	yes := true
	lpath := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := publish.OpenLedger(lpath)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []core.Image{
		{Kind: core.KindInstance, InstanceID: "a__a-1", Platform: core.AMD64, Ref: ref.Context().Digest(dig.String()).String(), Digest: digest.Digest(dig.String()), SpecKey: "k", Verified: &yes, Status: core.StatusPublished},
		// recorded but deleted from the registry since: must be rebuilt
		{Kind: core.KindInstance, InstanceID: "b__b-1", Platform: core.AMD64, Ref: reg.Host + "/swebench/sweb.eval.x86_64.b_1776_b-1@" + dB, Digest: dB, SpecKey: "k", Verified: &yes, Status: core.StatusPublished},
	} {
		if err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadLedger(context.Background(), lpath, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Key{{"a__a-1", core.AMD64}, {"b__b-1", core.AMD64}}
	existing, err := FindExisting(ctx, Latest(recs), want, nil, reg.Host+"/swebench", chk, 2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := BuildMatrix([]string{"a__a-1", "b__b-1"}, MatrixOptions{
		Platforms: []core.Platform{core.AMD64}, Shards: 2,
		Skip: func(id string, p core.Platform) bool { _, ok := existing[Key{id, p}]; return ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Include) != 1 || m.Include[0].IDs != "b__b-1" {
		t.Errorf("matrix %+v: want one job building only b__b-1", m.Include)
	}
}
