package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// TestBuildChecksTheRegistryFirst: `build --push` (and `--publish`) to a
// registry that is down, or that refuses the login, fails before anything
// is solved, in seconds, naming the host and where the credential was
// looked for. The BuildKit address is one nobody listens on: had the build
// got as far as a solve, it would have failed there, saying so, and the
// run directory would hold node logs.
func TestBuildChecksTheRegistryFirst(t *testing.T) {
	const user, pass = "builder", "Bu1ld-Pa55"
	login := regtest.Start(t, regtest.Options{User: user, Password: pass})
	plain := regtest.Start(t, regtest.Options{})
	dead := faultproxy.Refused(t)
	root, err := filepath.Abs(filepath.Join("..", "testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	creds := func(text string) *registry.Credentials {
		c, err := registry.NewCredentials(registry.CredentialOptions{Text: text, TextSource: "$SWEBUILD_REGISTRY_AUTH", DefaultRegistry: login.Host, DockerConfigDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	limit := registry.PushCheckBudget.MaxWaits() + 3*time.Second
	for _, tc := range []struct {
		name    string
		push    string
		publish string
		creds   *registry.Credentials
		want    []string
	}{
		{"dead push registry", dead + "/swebuild/build", "", creds(""),
			[]string{"nothing built: cannot push to " + dead + "/swebuild/build: registry " + dead + " does not answer (a registry on this machine: is it running?)"}},
		{"push registry refusing the login", login.Host + "/swebuild/build", "", creds(user + ":wrong"),
			[]string{"nothing built: cannot push to " + login.Host + "/swebuild/build: registry " + login.Host + " refused the request (credential for " + login.Host + " from $SWEBUILD_REGISTRY_AUTH)"}},
		{"push registry without a credential", login.Host + "/swebuild/build", "", creds(""),
			[]string{"no credential found for " + login.Host + " (looked in $SWEBUILD_REGISTRY_AUTH and "}},
		{"publish registry dead, push registry fine", plain.Host + "/swebuild/build", dead + "/release", creds(""),
			[]string{"cannot push to " + dead + "/release/sweb.eval.x86_64.fixture_1776_calc-1: registry " + dead + " does not answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runDir := t.TempDir()
			var out, log bytes.Buffer
			o := BuildOptions{
				Inputs: Inputs{Dataset: filepath.Join(root, "dataset.jsonl"), Specs: filepath.Join(root, "specs.json"),
					Instances: []string{"fixture__calc-1"}, CacheDir: t.TempDir(), Offline: true, Log: &log},
				Platforms: []core.Platform{core.AMD64},
				Builder: builder.Options{Builders: []builder.BuilderSpec{{Addr: "unix://" + filepath.Join(runDir, "no-buildkit.sock")}},
					Push: tc.push, RunDir: runDir, Progress: "quiet", Keychain: tc.creds},
				Out: &out, Log: &log,
			}
			if tc.publish != "" {
				o.Publish = &publish.RunOptions{Options: publish.Options{Repo: tc.publish}, Registry: registry.Options{Keychain: tc.creds}}
			}
			begin := time.Now()
			res, err := Build(context.Background(), o)
			el := time.Since(begin)
			t.Logf("%v: %v", el.Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("the build went ahead")
			}
			var pe *registry.PushCheckError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not the registry check's (the build got further)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if el > limit {
				t.Errorf("failed after %v, want at most %v", el, limit)
			}
			if res != nil {
				t.Errorf("a result %+v from a build that should not have started", res)
			}
			if logs, _ := os.ReadDir(filepath.Join(runDir, "logs")); len(logs) > 0 {
				t.Errorf("node logs written: %d", len(logs))
			}
			if strings.Contains(out.String(), "pushed") || strings.Contains(err.Error(), "needs the network") {
				t.Errorf("output says pushed, or the network:\n%s\n%v", out.String(), err)
			}
		})
	}
}
