package verify

// Tests of the container side on the real stack: BuildKit (buildkitd, runc)
// and the registry scripts/stack.sh starts, and an image made here from the
// fixture's Debian rootfs with a git repository at /testbed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/stacktest"
)

var testImages struct {
	sync.Mutex
	refs map[core.Platform]string
}

// testImage returns a BuildKit client and a pushed linux/amd64 test image
// (testImageFor).
func testImage(t *testing.T) (*bkclient.Client, string) {
	return testImageFor(t, core.AMD64)
}

// testImageFor returns a BuildKit client and a pushed image for p: the
// fixture's Debian rootfs (bash, git, python3, coreutils) with a repository
// at /testbed holding one commit of a.txt ("one\n"). Its base commit is
// HEAD.
func testImageFor(t *testing.T, p core.Platform) (*bkclient.Client, string) {
	t.Helper()
	st := stacktest.Require(t)
	rootfs := stacktest.Rootfs(t)
	ctx := context.Background()
	c, err := bkclient.New(ctx, st.BuildkitHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testImages.Lock()
	defer testImages.Unlock()
	if ref, ok := testImages.refs[p]; ok {
		return c, ref
	}
	ref, err := buildTestImage(ctx, c, rootfs, p, st.Registry+"/swebuild-test/verify-runner")
	if err != nil {
		t.Fatal(err)
	}
	if testImages.refs == nil {
		testImages.refs = map[core.Platform]string{}
	}
	testImages.refs[p] = ref
	return c, ref
}

func buildTestImage(ctx context.Context, c *bkclient.Client, rootfs string, p core.Platform, repo string) (string, error) {
	tar := stacktest.RootfsTarName(p.GOARCH())
	src := llb.Local("rootfs", llb.IncludePatterns([]string{tar}), llb.SharedKeyHint("swebuild-verify-test-rootfs-"+p.GOARCH()))
	img := llb.Scratch().File(llb.Copy(src, tar, "/", &llb.CopyInfo{AttemptUnpack: true})).
		AddEnv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").
		Run(llb.Args([]string{"/bin/sh", "-c", `set -e
git init -q /testbed && cd /testbed
printf 'one\n' >a.txt && git add a.txt
GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z git -c user.name=t -c user.email=t@t commit -q -m base`}),
			llb.Network(llb.NetModeNone)).Root()
	def, err := img.Marshal(ctx, llb.Platform(p.OCI()))
	if err != nil {
		return "", err
	}
	fsys, err := fsutil.NewFS(rootfs)
	if err != nil {
		return "", err
	}
	resp, err := c.Solve(ctx, def, bkclient.SolveOpt{
		LocalMounts: map[string]fsutil.FS{"rootfs": fsys},
		Exports: []bkclient.ExportEntry{{Type: bkclient.ExporterImage, Attrs: map[string]string{
			"name": repo, "push": "true", "push-by-digest": "true", "registry.insecure": "true",
		}}},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("building the %s test image: %w", p, err)
	}
	return repo + "@" + resp.ExporterResponse[exptypes.ExporterImageDigestKey], nil
}

// testJob is a job on the test image: a patch changing a.txt, eval.sh as
// given.
func testJob(t *testing.T, image, eval string) Job {
	return Job{
		Image: image, Platform: core.AMD64, BaseCommit: "HEAD", Timeout: 5 * time.Minute,
		Patch:      "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n",
		EvalScript: eval, Nonce: t.Name() + time.Now().String(),
	}
}

// TestRunNoBuildKitInside: the code under test sees nothing of BuildKit: not
// its tracing socket (covered), no socket mounted anywhere, no secrets, none
// of its tracing variables, not the runner's nonce.
func TestRunNoBuildKitInside(t *testing.T) {
	stacktest.Thorough(t)
	c, image := testImage(t)
	eval := `#!/bin/bash
python3 - <<'EOF'
import os, socket, stat
p = "/dev/otel-grpc.sock"
print("exists", os.path.exists(p), "socket", os.path.exists(p) and stat.S_ISSOCK(os.stat(p).st_mode))
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(p)
    print("CONNECTED to", p)
except OSError as e:
    print("cannot connect:", e)
for line in open("/proc/self/mountinfo"):
    mp = line.split()[4].replace("\\040", " ")
    try:
        if stat.S_ISSOCK(os.stat(mp).st_mode):
            print("SOCKET MOUNTED at", mp)
    except OSError:
        pass
for d in ("/run/secrets", "/run/buildkit"):
    if os.path.exists(d):
        print("PRESENT", d, os.listdir(d))
print("ENV", sorted(k for k in os.environ if k.startswith("OTEL_") or k in ("TRACEPARENT", "TRACESTATE", "SWEBUILD_VERIFY_NONCE")))
EOF
`
	out, err := (&BuildKitEngine{Client: c}).Run(context.Background(), testJob(t, image, eval))
	if err != nil {
		t.Fatal(err)
	}
	if out.InfraError != "" || !out.Applied || !out.TestRan || out.TestExit != 0 {
		t.Fatalf("run: %+v", out)
	}
	t.Logf("eval.sh said:\n%s", out.TestOutput)
	for _, bad := range []string{"CONNECTED", "SOCKET MOUNTED", "PRESENT"} {
		if strings.Contains(out.TestOutput, bad) {
			t.Errorf("the code under test reached BuildKit: %q in\n%s", bad, out.TestOutput)
		}
	}
	if !strings.Contains(out.TestOutput, "cannot connect:") || !strings.Contains(out.TestOutput, "ENV []") {
		t.Errorf("want no connection and no BuildKit variables:\n%s", out.TestOutput)
	}
}

// TestRunLargeInputs: a patch and an eval.sh far above BuildKit's 16 MiB
// message limit get into the container whole.
func TestRunLargeInputs(t *testing.T) {
	stacktest.Thorough(t)
	c, image := testImage(t)
	// A 20 MiB patch adding big.txt, a 17 MiB eval.sh (mostly a comment).
	var patch strings.Builder
	const bigLines = 20 << 20 / 64
	fmt.Fprintf(&patch, "diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,%d @@\n", bigLines)
	line := strings.Repeat("b", 63)
	for range bigLines {
		patch.WriteString("+" + line + "\n")
	}
	eval := "#!/bin/bash\n# " + strings.Repeat("c", 17<<20) + "\n" +
		"echo '" + grading.StartTestOutput + "'\nwc -c </testbed/big.txt\nwc -c </eval.sh\necho '" + grading.EndTestOutput + "'\n"
	job := testJob(t, image, eval)
	job.Patch = patch.String()
	out, err := (&BuildKitEngine{Client: c}).Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if out.InfraError != "" || !out.Applied || !out.TestRan {
		t.Fatalf("run: %+v", out)
	}
	want := fmt.Sprintf("%s\n%d\n%d\n%s\n", grading.StartTestOutput, bigLines*64, len(eval), grading.EndTestOutput)
	if out.TestOutput != want {
		t.Errorf("the patch or eval.sh did not arrive whole: output %q, want %q", out.TestOutput, want)
	}
}

// TestRunLargeOutput: a 20 MiB test output comes back whole.
func TestRunLargeOutput(t *testing.T) {
	stacktest.Thorough(t)
	c, image := testImage(t)
	out, err := (&BuildKitEngine{Client: c}).Run(context.Background(), testJob(t, image, `#!/bin/bash
echo '`+grading.StartTestOutput+`'
python3 -c 'import sys
for i in range(20 * 16384): sys.stdout.write("%063d\n" % i)'
echo '`+grading.EndTestOutput+`'
`))
	if err != nil {
		t.Fatal(err)
	}
	if out.InfraError != "" || !out.Applied || !out.TestRan {
		t.Fatalf("run: %+v", out)
	}
	var want strings.Builder
	want.WriteString(grading.StartTestOutput + "\n")
	for i := range 20 * 16384 {
		fmt.Fprintf(&want, "%063d\n", i)
	}
	want.WriteString(grading.EndTestOutput + "\n")
	if out.TestOutput != want.String() {
		t.Errorf("20 MiB output: %d bytes back, want %d; ends %q", len(out.TestOutput), want.Len(), out.TestOutput[max(0, len(out.TestOutput)-100):])
	}
}

// TestRunLongOutput: a 70 MiB test output comes back as its head and tail
// with the count of what was left out, and leaves no big file in BuildKit's
// cache, natively and under QEMU.
func TestRunLongOutput(t *testing.T) {
	stacktest.Thorough(t)
	for _, p := range core.AllPlatforms() {
		t.Run(p.Arch(), func(t *testing.T) {
			c, image := testImageFor(t, p)
			ctx := context.Background()
			start := time.Now()
			const size = 70 << 20
			line := fmt.Sprintf("%063d", 0)
			job := testJob(t, image, "#!/bin/bash\necho '"+grading.StartTestOutput+"'\nyes "+line+" | head -c "+fmt.Sprint(size)+"\necho 'last line'\necho '"+grading.EndTestOutput+"'\n")
			job.Platform = p
			out, err := (&BuildKitEngine{Client: c}).Run(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			total := int64(len(grading.StartTestOutput)+1) + size + int64(len("last line\n")+len(grading.EndTestOutput)+1)
			if out.TestOutputSize != total || out.TestOutputOmitted <= 0 || out.TestOutputOmitted < total-DefaultMaxOutput {
				t.Errorf("70 MiB output: size %d (want %d), %d left out", out.TestOutputSize, total, out.TestOutputOmitted)
			}
			if !strings.HasPrefix(out.TestOutput, grading.StartTestOutput+"\n"+line+"\n") || !strings.HasSuffix(out.TestOutput, line+"\nlast line\n"+grading.EndTestOutput+"\n") ||
				!strings.Contains(out.TestOutput, fmt.Sprintf("[swebuild verify: %d bytes of output left out here", out.TestOutputOmitted)) {
				t.Errorf("70 MiB output: no head, tail or note: %d bytes back", len(out.TestOutput))
			}
			if n := int64(len(out.TestOutput)); n > DefaultMaxOutput+200 {
				t.Errorf("70 MiB output: %d bytes back, more than the %d kept", n, DefaultMaxOutput)
			}

			// No big output left in BuildKit's cache: the test output is
			// streamed, never written in a container, and the prepare
			// exec's root (the only thing of the run kept: the patched
			// repository and the prepare script's files) is small.
			du, err := c.DiskUsage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, r := range du {
				if r.CreatedAt.Before(start) || !strings.Contains(r.Description, inDir+"/"+fileRun) {
					continue
				}
				seen++
				t.Logf("cache record %s %q: %d bytes", r.ID, r.Description, r.Size)
				if r.Size > 8<<20 {
					t.Errorf("cache record %s (%s) holds %d bytes", r.ID, r.Description, r.Size)
				}
			}
			if seen == 0 {
				t.Errorf("no cache record of the prepare exec found since %s: the check looked at nothing", start)
			}
		})
	}
}

// TestRunnerGradesTruncatedOutput: a long test output is graded from its
// head and tail when the labelled results are in them, and said to be
// ungradable when one is in the part left out.
func TestRunnerGradesTruncatedOutput(t *testing.T) {
	stacktest.Thorough(t)
	c, image := testImage(t)
	fill := `python3 -c 'import sys
for i in range(3 * 16384): sys.stdout.write("%063d\n" % i)'
`
	eval := func(middle, end string) string {
		return "#!/bin/bash\necho '" + grading.StartTestOutput + "'\n" + fill + middle + fill + end + "echo '" + grading.EndTestOutput + "'\n"
	}
	inst := core.Instance{Repo: "fixture/calc", InstanceID: "fixture__trunc-1", BaseCommit: "HEAD",
		Patch:      "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n",
		FailToPass: []string{"tests/test_a.py::test_fix"}, PassToPass: []string{"tests/test_a.py::test_old"}}
	targets := []Target{
		{Instance: inst, Platform: core.AMD64, Image: image, Parser: "parse_log_pytest",
			EvalScript: eval("", "echo 'PASSED tests/test_a.py::test_fix'\necho 'PASSED tests/test_a.py::test_old'\n")},
	}
	inst2 := inst
	inst2.InstanceID = "fixture__trunc-2"
	targets = append(targets, Target{Instance: inst2, Platform: core.AMD64, Image: image, Parser: "parse_log_pytest",
		EvalScript: eval("echo 'PASSED tests/test_a.py::test_old'\n", "echo 'PASSED tests/test_a.py::test_fix'\n")})
	r := &Runner{Engine: &BuildKitEngine{Client: c}, RunDir: t.TempDir(), MaxOutput: 2 << 20, Timeout: 5 * time.Minute}
	sum, err := r.Verify(context.Background(), targets, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, res := range sum.Results {
		got[res.InstanceID] = res
	}
	if res := got["fixture__trunc-1"]; !res.OK() || !res.Resolved || res.Truncated == nil || res.Truncated.Omitted <= 0 {
		t.Errorf("results in the tail: %+v (%s)", res, res.Why())
	}
	res := got["fixture__trunc-2"]
	if res.OK() || res.Resolved || res.Failure != FailureTruncated || !strings.Contains(res.Error, "tests/test_a.py::test_old") {
		t.Errorf("a result in the part left out: %+v", res)
	}
	for _, res := range sum.Results {
		b, err := os.ReadFile(filepath.Join(res.Dir, "test_output.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 2<<20+200 || !strings.Contains(string(b), "bytes of output left out here") {
			t.Errorf("%s: test_output.txt of %d bytes does not say it was cut", res.InstanceID, len(b))
		}
	}
}
