package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// TestDefaultLedger: publish's ledger is publish-ledger.jsonl beside the
// metadata file, else in the run directory.
func TestDefaultLedger(t *testing.T) {
	for _, tc := range []struct{ metadata, runDir, want string }{
		{"runs/night/metadata.jsonl", "runs/night/build", "runs/night/publish-ledger.jsonl"},
		{"metadata.jsonl", "runs/x", "publish-ledger.jsonl"},
		{"", "runs/demo/dataset-build", "runs/demo/dataset-build/publish-ledger.jsonl"},
	} {
		if got := defaultLedger(tc.metadata, tc.runDir); got != filepath.FromSlash(tc.want) {
			t.Errorf("defaultLedger(%q, %q) = %q, want %q", tc.metadata, tc.runDir, got, tc.want)
		}
	}
}

// TestWriteExports: the build says where its images went, counting only
// what was pushed or written; nothing exported says how to export.
func TestWriteExports(t *testing.T) {
	ref := "127.0.0.1:5000/swebuild/sweb.eval.x86_64.fixture__calc-1@sha256:" + strings.Repeat("a", 64)
	built := core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Status: core.StatusBuilt, Ref: ref}
	inLayout := core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-2", Platform: core.AMD64, Status: core.StatusBuilt, OCILayout: "out/oci"}
	failed := core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-2", Platform: core.ARM64, Status: core.StatusFailed, Error: "exit code 1", Ref: ref}
	for _, tc := range []struct {
		name string
		o    builder.Options
		recs []core.Image
		want []string
	}{
		{"nothing exported", builder.Options{}, []core.Image{built}, []string{"nothing exported: the images are only in BuildKit's cache", "export with --push REPO, or --output type=oci,dest=DIR"}},
		{"pushed", builder.Options{Push: "127.0.0.1:5000/swebuild"}, []core.Image{built, failed}, []string{"exported: 1 image(s) pushed by digest to 127.0.0.1:5000/swebuild\n"}},
		{"nothing built", builder.Options{Push: "127.0.0.1:5000/swebuild"}, []core.Image{failed}, []string{"nothing pushed to 127.0.0.1:5000/swebuild: no image was built\n"}},
		{"layout", builder.Options{Output: &builder.Output{Type: builder.OutputOCI, Dest: "out/oci"}}, []core.Image{inLayout, failed}, []string{"exported: 1 image(s) into the OCI layout out/oci (index.json names each image by its key)\n"}},
	} {
		var b bytes.Buffer
		writeExports(&b, tc.o, tc.recs)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: said %q, want %q", tc.name, b.String(), w)
			}
		}
	}
}

// TestFindContextFile: a profile's context file is taken from the first
// directory holding it, as an absolute path; none holding it is an error
// naming the file, the directories and how to make it.
func TestFindContextFile(t *testing.T) {
	empty, full := t.TempDir(), fixtureContextDir(t)
	got, err := findContextFile("rootfs-arm64.tar", []string{empty, full})
	if err != nil || got != filepath.Join(full, "rootfs-arm64.tar") || !filepath.IsAbs(got) {
		t.Errorf("found %q, %v; want %s", got, err, filepath.Join(full, "rootfs-arm64.tar"))
	}
	_, err = findContextFile("rootfs-riscv64.tar", []string{empty, full})
	if err == nil || err.Error() != "context file rootfs-riscv64.tar not found in "+empty+", "+full+" (scripts/fixture.sh rootfs makes the fixture's rootfs tarballs)" {
		t.Errorf("a missing context file: %v", err)
	}
}

// TestBuildStopsAtTheBuilder: the fixture is loaded and planned for both
// platforms (what the result says), then the builder refuses its options:
// no report, no metadata file, the builder's error returned. calc-1 on
// both platforms and the x86-only textutil-2 on amd64 are 3 instance
// nodes over each platform's Python base and env: 7 nodes, 2 up to the
// bases, 4 up to the envs. With Verify the gold check is set up first (a
// parser that does not exist is refused before anything is planned to
// build).
func TestBuildStopsAtTheBuilder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		until  string
		verify *GoldCheckOptions
		nodes  string
		want   string
	}{
		{"all", "", nil, "7 nodes planned", `progress mode "fancy"`},
		{"until base", "base", nil, "2 nodes planned", `progress mode "fancy"`},
		{"until env", "env", nil, "4 nodes planned", `progress mode "fancy"`},
		{"verify", "", &GoldCheckOptions{Control: true}, "7 nodes planned", `progress mode "fancy"`},
		{"verify, unknown parser", "", &GoldCheckOptions{Parser: "parse_log_nonesuch"}, "", `log parser "parse_log_nonesuch": want one of`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := filepath.Join(t.TempDir(), "metadata.jsonl")
			var log bytes.Buffer
			o := BuildOptions{Inputs: fixtureInputs(t, "fixture__calc-1", "fixture__textutil-2"), Platforms: core.AllPlatforms(),
				ContextDirs: []string{fixtureContextDir(t)}, MetadataFile: meta, Log: &log, Until: tc.until, Verify: tc.verify,
				Builder: builder.Options{RunDir: t.TempDir(), Progress: "fancy"}}
			res, err := Build(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(meta); !os.IsNotExist(err) {
				t.Errorf("a metadata file with nothing built: %v", err)
			}
			if tc.nodes == "" {
				if res != nil {
					t.Errorf("a result %+v for options refused", res)
				}
				return
			}
			if res == nil || res.Plan == nil || res.Report != nil || res.Records != nil || (res.Gold != nil) != (tc.verify != nil) {
				t.Fatalf("result %+v: want the plan, the gold check when verifying, and nothing built", res)
			}
			if !strings.Contains(log.String(), "swebuild build: "+tc.nodes+"; logs in "+o.Builder.RunDir) {
				t.Errorf("log %q, want %q", log.String(), tc.nodes)
			}
		})
	}
}

// TestBuildPublishStage: after a build, publish takes only what it may
// (with Verify, verified images), its ledger beside the metadata file, and
// says where; a publish that fails is the build's error, "publishing: ".
func TestBuildPublishStage(t *testing.T) {
	reg := regtest.InProcess(t)
	dir := t.TempDir()
	o := BuildOptions{MetadataFile: filepath.Join(dir, "metadata.jsonl"), Verify: &GoldCheckOptions{},
		Publish: &publish.RunOptions{Options: publish.Options{Repo: reg.Host + "/pub"}, Registry: registry.Options{Keychain: regtest.Anonymous()}}}
	res := &BuildResult{Records: []core.Image{
		{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Status: core.StatusFailed, Error: "exit code 1"},
	}}
	var out bytes.Buffer
	err := o.publish(context.Background(), res, filepath.Join(dir, "run"), &out)
	ledger := filepath.Join(dir, "publish-ledger.jsonl")
	if !strings.Contains(out.String(), "publishing 1 record(s) under "+reg.Host+"/pub\n") {
		t.Errorf("said %q", out.String())
	}
	if res.Published == nil {
		t.Fatalf("no publish summary (err %v)", err)
	}
	if !strings.Contains(out.String(), "ledger:    "+ledger+"\n") {
		t.Errorf("said %q, want the ledger %s", out.String(), ledger)
	}
	if _, serr := os.Stat(ledger); serr != nil {
		t.Errorf("ledger: %v", serr)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "publishing: ") {
		t.Errorf("err = %v, want it to say publishing", err)
	}
}
