package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/registry"
)

// TestAuthRegistryE2E runs every registry path of swebuild through the stack's
// registry that requires a login, with the login only in DOCKER_CONFIG (as
// docker login and docker/login-action leave it): build --push with a
// registry cache (BuildKit's session asks swebuild for the credential),
// publish and sizes (go-containerregistry), verify --images (BuildKit pulls).
// With no credential, or a refused one, each fails naming the registry and
// where the credential came from. A counting proxy in front of the
// login-free registry plays "another host" on plain HTTP: it never sees an
// Authorization header, even when it asks for a login.
func TestAuthRegistryE2E(t *testing.T) {
	st := stacktest.RequireAuth(t)
	f := newFixtureStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	t.Setenv(registry.DefaultAuthEnv, "")
	t.Setenv("DOCKER_CONFIG", st.DockerConfig)
	tmp := t.TempDir()
	auth := st.AuthRegistry
	// Repositories of this run only: the stack's registries keep what
	// earlier runs pushed, and a cache or image already there is not
	// pushed again (nothing would reach the counting proxy).
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	repo := auth + "/swebuild-auth-test-" + run
	other := faultproxy.Start(t, st.Registry, faultproxy.Config{})
	otherRepo := other.Host + "/swebuild-auth-test-" + run
	one := []string{"--instance", "fixture__calc-1", "--platform", "linux/amd64"}

	// 1. build --push, registry cache to and from the login registry, and
	// a cache export to the other host.
	md := filepath.Join(tmp, "metadata.jsonl")
	if _, err := f.build(t, ctx, f.dataset, repo+"/build", md, append(one,
		"--cache-to", "type=registry,ref="+repo+"/cache",
		"--cache-from", "type=registry,ref="+repo+"/cache",
		"--cache-to", "type=registry,ref="+otherRepo+"/cache")...); err != nil {
		t.Fatalf("build --push through the login: %v", err)
	}
	recs, err := core.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want base, env and instance", len(recs))
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.Ref, repo+"/build@sha256:") {
			t.Errorf("%s: ref %q, want one in %s/build", r.Key, r.Ref, repo)
		}
	}
	creds, err := registry.NewCredentials(registry.CredentialOptions{DockerConfigDir: st.DockerConfig})
	if err != nil {
		t.Fatal(err)
	}
	cacheRepo, err := name.NewRepository(repo+"/cache", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(cacheRepo, remote.WithContext(ctx), remote.WithAuthFromKeychain(creds))
	// The registry cache is for the shared layers: the base and the env
	// export one tag each, the instance none (docs/builders.md).
	if err != nil || len(tags) != 2 {
		t.Errorf("cache tags in %s: %v, %v; want one per shared node (base, env)", cacheRepo, tags, err)
	}
	if s := other.Stats(); s.Forwarded[faultproxy.KindManifestPut] == 0 || s.Authorization != 0 {
		t.Errorf("other host: %s; want the cache exported there with no Authorization header", s)
	}

	// 2. publish (go-containerregistry, same source), then verify --images
	// (BuildKit pulls the published image) and sizes.
	var stdout, stderr bytes.Buffer
	if err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", repo, "--ledger", filepath.Join(tmp, "ledger.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish through the login: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if err := runVerify(ctx, append([]string{"--gold", "--dataset", f.dataset, "--specs", f.specs, "--images", repo,
		"--run-dir", filepath.Join(tmp, "verify"), "--timeout", "10m"}, one...), &stdout, &stderr); err != nil {
		t.Fatalf("verify --images through the login: %v\n%s\n%s", err, stdout.String(), tail(stderr.String(), 3000))
	}
	ids := filepath.Join(tmp, "ids.txt")
	if err := os.WriteFile(ids, []byte("fixture__calc-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := runSizes(ctx, []string{"--images", repo, "--ids", ids, "--format", "json"}, &stdout, &stderr); err != nil {
		t.Fatalf("sizes through the login: %v\n%s", err, stderr.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || !strings.Contains(stdout.String(), "fixture__calc-1") {
		t.Errorf("sizes report: %v\n%s", err, stdout.String())
	}
	// Publishing to the other host copies from the login registry: the
	// credential goes to the login registry only.
	stdout.Reset()
	other.ResetStats()
	if err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", otherRepo, "--ledger", filepath.Join(tmp, "ledger-other.jsonl")}, &stdout, &stderr); err != nil {
		t.Fatalf("publish to the other host: %v\n%s", err, stderr.String())
	}
	if s := other.Stats(); s.Requests[faultproxy.KindManifestPut] == 0 || s.Authorization != 0 {
		t.Errorf("other host after publish: %s; want manifests put with no Authorization header", s)
	}

	// 3. The other host asks for a login, as any registry may: nothing is
	// offered to it, and the error names it and says no credential was
	// found for it.
	other.SetConfig(faultproxy.Config{Challenge: "other"})
	other.ResetStats()
	err = buildErr(t, ctx, f, repo+"/build", filepath.Join(tmp, "md-challenge.jsonl"), append(one,
		"--cache-to", "type=registry,ref="+otherRepo+"/cache2")...)
	wantErr(t, "build, cache export to a host that asks for a login", err, "registry "+other.Host+" refused", "no credential found for "+other.Host+" (looked in")
	err = publishErr(ctx, md, otherRepo+"-2", filepath.Join(tmp, "ledger-other2.jsonl"))
	wantErr(t, "publish to a host that asks for a login", err, other.Host, "no credential found for "+other.Host)
	if s := other.Stats(); s.Total() == 0 || s.Authorization != 0 {
		t.Errorf("challenging other host: %s; want requests and no Authorization header", s)
	}

	// 4. No credential anywhere: each path fails naming the registry and
	// where swebuild looked.
	empty := t.TempDir()
	t.Setenv("DOCKER_CONFIG", empty)
	none := "no credential found for " + auth + " (looked in $" + registry.DefaultAuthEnv + " and " + filepath.Join(empty, "config.json") + ")"
	err = buildErr(t, ctx, f, repo+"/build", filepath.Join(tmp, "md-none.jsonl"), one...)
	wantErr(t, "build --push with no credential", err, auth, none)
	err = publishErr(ctx, md, repo+"-none", filepath.Join(tmp, "ledger-none.jsonl"))
	wantErr(t, "publish with no credential", err, auth, none)
	stderr.Reset()
	err = runVerify(ctx, append([]string{"--gold", "--dataset", f.dataset, "--specs", f.specs, "--images", repo,
		"--run-dir", filepath.Join(tmp, "verify-none"), "--timeout", "10m"}, one...), &stdout, &stderr)
	if err == nil {
		t.Error("verify --images with no credential: no error")
	} else {
		wantErr(t, "verify --images with no credential", fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String()), auth, none)
	}

	// 5. A credential the registry refuses: the error names the registry
	// and the file it came from, never the password.
	bad := t.TempDir()
	cfg := `{"auths": {"` + auth + `": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("swebuild:not-the-password")) + `"}}}`
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", bad)
	refused := "credential for " + auth + " from " + filepath.Join(bad, "config.json") + " (auths)"
	err = buildErr(t, ctx, f, repo+"/build", filepath.Join(tmp, "md-bad.jsonl"), one...)
	wantErr(t, "build --push with a refused credential", err, auth, refused)
	err = publishErr(ctx, md, repo+"-bad", filepath.Join(tmp, "ledger-bad.jsonl"))
	wantErr(t, "publish with a refused credential", err, auth, refused)
	if err != nil && strings.Contains(err.Error(), "not-the-password") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// buildErr runs swebuild build and returns its error with what it printed
// (the command's error is a count; each node's error is printed).
func buildErr(t *testing.T, ctx context.Context, f fixtureStack, push, md string, extra ...string) error {
	t.Helper()
	args := append([]string{"--dataset", f.dataset, "--specs", f.specs, "--push", push, "--metadata-file", md,
		"--run-dir", filepath.Join(t.TempDir(), "build"), "--context-dir", f.rootfs, "--context-dir", f.ctxDir, "--progress", "quiet"}, extra...)
	var stdout, stderr bytes.Buffer
	err := runBuild(ctx, args, &stdout, &stderr)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String())
}

// publishErr runs swebuild publish and returns its error with what it
// printed (each failed image's error).
func publishErr(ctx context.Context, md, repo, ledger string) error {
	var stdout, stderr bytes.Buffer
	err := runPublish(ctx, []string{"--unsigned", "--metadata-file", md, "--repo", repo, "--ledger", ledger}, &stdout, &stderr)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String())
}

// wantErr checks that err names host and holds want.
func wantErr(t *testing.T, what string, err error, host, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	if !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v\nwant it to name %s and say %q", what, err, host, want)
		return
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.Contains(line, want) {
			t.Logf("%s: %s", what, line)
			break
		}
	}
}
