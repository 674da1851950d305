package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
	"github.com/swebuild/swebuild/sbom"
)

// randomBuild writes one random image per platform of instance id into an
// OCI layout and returns the build records publish reads.
func randomBuild(t *testing.T, id string, platforms []core.Platform) []core.Image {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	var adds []mutate.IndexAddendum
	var recs []core.Image
	yes := true
	for _, p := range platforms {
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = p.OCI().OS, p.OCI().Architecture
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		dg, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img})
		recs = append(recs, core.Image{Kind: core.KindInstance, InstanceID: id, Platform: p, Digest: digest.Digest(dg.String()),
			OCILayout: dir, SpecKey: "k-" + p.Arch(), Verified: &yes, Status: core.StatusBuilt})
	}
	if _, err := layout.Write(dir, mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestFiveReadersTokenRealm (issue 26, one publication reader): a real
// distribution registry with token authentication whose token server is on
// another port of 127.0.0.1 (internal/regtest), the credential only in
// $SWEBUILD_REGISTRY_AUTH. `swebuild publish` puts fixture__calc-1's two
// images and its index there, with an environment document attached to
// each; then each of the five readers of a publication accepts the realm:
// check (3/3), sizes (both images measured), drift (both documents read,
// no drift), diff-images (the per-arch name and the index's amd64 image are
// the same image) and verify --images (both images resolved and pinned
// before the engine is asked for: here a Docker socket that does not
// exist). With a wrong password, each says the login was refused, naming
// the registry.
func TestFiveReadersTokenRealm(t *testing.T) {
	reg := regtest.Start(t, regtest.Options{User: "alice", Password: "right", TokenRealm: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv(registry.DefaultAuthEnv, reg.Host+"=alice:right")
	root := filepath.Join("..", "..", "testdata", "fixture")
	tmp := t.TempDir()
	const id = "fixture__calc-1"
	both := core.AllPlatforms()

	// Publish, and attach a document to each per-arch image.
	md := filepath.Join(tmp, "metadata.jsonl")
	if err := core.WriteFile(md, randomBuild(t, id, both)); err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/realm"
	var so, se bytes.Buffer
	if err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", repo, "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &so, &se); err != nil {
		t.Fatalf("publish through the token realm: %v\n%s", err, se.String())
	}
	creds, err := registryCredentials(registry.DefaultAuthEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	client, err := registry.New(registry.Options{Keychain: creds})
	if err != nil {
		t.Fatal(err)
	}
	refs := &attest.Referrers{Client: client, Settle: 10 * time.Millisecond}
	namer := manifests.Namer{Repo: repo}
	for _, p := range both {
		archRepo, err := name.NewRepository(namer.ArchRepo(p.Arch(), id), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		d, err := client.Head(ctx, archRepo.Tag("latest"))
		if err != nil || d == nil {
			t.Fatalf("HEAD %s: %v %v", archRepo, d, err)
		}
		doc, err := (&sbom.Document{Kind: "instance", Platform: p, Packages: []sbom.Package{{Ecosystem: sbom.PyPI, Name: "fixdep", Version: "1.0"}}}).CycloneDX()
		if err != nil {
			t.Fatal(err)
		}
		a, err := attest.NewArtifact(v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}, sbom.MediaType, sbom.MediaType, doc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := refs.Attach(ctx, archRepo, a); err != nil {
			t.Fatal(err)
		}
	}

	// The control: go-containerregistry's remote alone (what diff-images
	// called before) refuses this realm (its guard against a private
	// realm on another port); the readers go through the client's realm
	// route.
	amd, err := name.ParseReference(namer.ArchRepo(core.ArchX86_64, id)+":latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Get(amd, remote.WithContext(ctx), remote.WithAuthFromKeychain(creds)); err == nil {
		t.Fatal("go-containerregistry's remote accepted the realm on another port: the test proves nothing")
	} else {
		t.Logf("go-containerregistry's remote alone: %v", err)
	}

	fixture := []string{"--dataset", filepath.Join(root, "dataset.jsonl"), "--specs", filepath.Join(root, "specs.json"), "--instance", id, "--offline", "--cache-dir", t.TempDir()}
	ids := filepath.Join(tmp, "ids.txt")
	if err := os.WriteFile(ids, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readers := []struct {
		name string
		run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
		args []string
		// ok checks a run with the right credential.
		ok func(t *testing.T, err error, stdout, stderr string)
	}{
		{"check", runCheck, append([]string{"--repo", repo}, fixture...), func(t *testing.T, err error, stdout, stderr string) {
			if err != nil || !strings.HasPrefix(stdout, "3/3 images present") {
				t.Errorf("check: %v\n%s%s", err, stdout, stderr)
			}
		}},
		{"sizes", runSizes, []string{"--images", repo, "--ids", ids, "--platform", "linux/amd64,linux/arm64", "--format", "json"}, func(t *testing.T, err error, stdout, stderr string) {
			var rep struct {
				A struct {
					Images []struct{ Status, Platform string }
				}
			}
			if jerr := json.Unmarshal([]byte(stdout), &rep); err != nil || jerr != nil || len(rep.A.Images) != 2 || rep.A.Images[0].Status != "ok" || rep.A.Images[1].Status != "ok" {
				t.Errorf("sizes: %v %v %+v\n%s%s", err, jerr, rep, stdout, stderr)
			}
		}},
		{"drift", runDrift, append([]string{"--images", repo, "--against", repo}, fixture...), func(t *testing.T, err error, stdout, stderr string) {
			if err != nil || !strings.Contains(stdout, "2 images compared: 2 unchanged") {
				t.Errorf("drift: %v\n%s%s", err, stdout, stderr)
			}
		}},
		{"diff-images", runDiffImages, []string{namer.ArchRepo(core.ArchX86_64, id) + ":latest", namer.IndexRepo(id) + ":latest", "--platform", "linux/amd64"}, func(t *testing.T, err error, stdout, stderr string) {
			if err != nil || !strings.Contains(stdout, "identical") {
				t.Errorf("diff-images: %v\n%s%s", err, stdout, stderr)
			}
		}},
		{"verify --images", runVerify, append([]string{"--gold", "--images", repo, "--platform", "linux/amd64,linux/arm64", "--engine", "docker", "--docker-host", "unix://" + filepath.Join(tmp, "no-docker.sock"), "--run-dir", filepath.Join(tmp, "run")}, fixture...),
			func(t *testing.T, err error, stdout, stderr string) {
				if err == nil || !strings.Contains(err.Error(), "connecting to Docker") || !strings.Contains(stderr, "verify: 2 image(s) resolved in the registry, pinned by digest") {
					t.Errorf("verify: %v (want the Docker engine's error, after both images resolved)\n%s%s", err, stdout, stderr)
				}
			}},
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := r.run(ctx, r.args, &stdout, &stderr)
			r.ok(t, err, stdout.String(), stderr.String())
			if strings.Contains(stderr.String()+stdout.String(), "refused") {
				t.Errorf("%s: a refusal with the right credential:\n%s%s", r.name, stdout.String(), stderr.String())
			}
		})
	}
	t.Setenv(registry.DefaultAuthEnv, reg.Host+"=alice:wrong")
	for _, r := range readers {
		t.Run(r.name+" wrong password", func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := r.run(ctx, r.args, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if err != nil {
				all += err.Error()
			}
			t.Logf("%s: %s", r.name, lastLine(all))
			if err == nil || !strings.Contains(all, "refused") || !strings.Contains(all, reg.Host) {
				t.Errorf("%s with a wrong password: %v, want a refusal naming %s\n%s", r.name, err, reg.Host, all)
			}
		})
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
