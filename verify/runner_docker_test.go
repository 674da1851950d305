package verify

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dockerclient "github.com/moby/moby/client"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/grading"
	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// TestInputTar: the tar copied into the container holds the wrapper's
// input directory with every input file (name, mode, bytes) and an empty
// output directory, all relative to /.
func TestInputTar(t *testing.T) {
	job := Job{Patch: "the patch\n", EvalScript: "#!/bin/bash\necho hi\n", BaseCommit: "abc", Timeout: 90 * time.Second, SkipApply: true}
	want := inputFiles(job)
	r, err := inputTar(want)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	dirs := map[string]bool{}
	got := map[string]inputFile{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			dirs[h.Name] = true
		case tar.TypeReg:
			dir, name, _ := strings.Cut(h.Name, "swebuild-verify/in/")
			if dir != "" || name == "" {
				t.Errorf("file %q outside swebuild-verify/in/", h.Name)
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			got[name] = inputFile{data: b, mode: h.FileInfo().Mode().Perm()}
		default:
			t.Errorf("entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	for _, d := range []string{"swebuild-verify/", "swebuild-verify/in/", "swebuild-verify/out/"} {
		if !dirs[d] {
			t.Errorf("no directory %s in %v", d, dirs)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d files, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || !bytes.Equal(g.data, w.data) || g.mode != w.mode {
			t.Errorf("%s: got %q %v, want %q %v", name, g.data, g.mode, w.data, w.mode)
		}
	}
	if _, ok := got[fileSkip]; !ok {
		t.Errorf("control run without %s", fileSkip)
	}
}

// TestExtractOutputs: the output directory's tar as the daemon sends it
// (entries out/NAME) is read as the BuildKit engine reads its output
// directory: the prepare script's files only (not links, not
// subdirectories, not other files), a cut output joined from its head and
// tail with the count left out.
func TestExtractOutputs(t *testing.T) {
	head := strings.Repeat("h\n", 8)             // 16 bytes kept from the start
	tailText := "x\n" + strings.Repeat("t\n", 7) // last 16 bytes, starting mid-line
	type entry struct {
		name, body, link string
		typ              byte
	}
	entries := []entry{
		{name: "out/", typ: tar.TypeDir},
		{name: "out/wrap_start", body: "100.5\n"},
		{name: "out/wrap_end", body: "110.5\n"},
		{name: "out/apply.1.out", body: "Checking patch a.txt...\n"},
		{name: "out/apply.1.rc", body: "0\n"},
		{name: "out/diff_before", body: head},
		{name: "out/diff_before.tail", body: tailText},
		{name: "out/diff_before.size", body: "1000\n"},
		{name: "out/prepared", body: "ok\n"},
		{name: "out/junk.txt", body: "left there\n"},
		{name: "out/test_rc", body: "0\n"},
		{name: "out/sub/", typ: tar.TypeDir},
		{name: "out/sub/apply.1.rc", body: "7\n"},
		{name: "out/leak_x", typ: tar.TypeSymlink, link: "/etc/shadow"},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := extractOutputs(&buf, dir); err != nil {
		t.Fatal(err)
	}
	files, cut, err := readOutputs(context.Background(), dirRef{dir: dir}, "/", 32)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"junk.txt", "test_rc", "sub", "leak_x", "diff_before.tail", "diff_before.size"} {
		if _, ok := files[bad]; ok {
			t.Errorf("%s was read", bad)
		}
	}
	out, ready, err := parseOutputs(Job{Timeout: time.Minute}, files)
	if err != nil {
		t.Fatal(err)
	}
	if !ready || !out.Applied || out.TestRan || len(out.Attempts) != 1 || out.Attempts[0].Output != "Checking patch a.txt...\n" {
		t.Errorf("parsed %+v (ready %v)", out, ready)
	}
	if out.InContainerSeconds != 10 {
		t.Errorf("clock: prepare %v s; want 10", out.InContainerSeconds)
	}
	c, ok := cut["diff_before"]
	// 1000 bytes written; kept: 16 of the head and the 14 of the tail after
	// its first newline.
	if !ok || c.size != 1000 || c.omitted != 1000-16-14 {
		t.Errorf("cut %+v, want size 1000, %d omitted", c, 1000-16-14)
	}
	want := head + "[swebuild verify: 970 bytes of output left out here: it was 1000 bytes; the first 16 and the last 14 are kept]\n" + strings.Repeat("t\n", 7)
	if out.DiffBefore != want {
		t.Errorf("diff %q, want %q", out.DiffBefore, want)
	}
}

// dockerEngine returns an engine on the stack's Docker daemon.
func dockerEngine(t *testing.T) *DockerEngine {
	t.Helper()
	host := stacktest.RequireDocker(t)
	e, err := NewDockerEngine(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// verifyLeftovers counts the daemon's containers (running or not), volumes
// and images that carry the engine's label: what runs leave behind.
func verifyLeftovers(t *testing.T, e *DockerEngine) string {
	t.Helper()
	ctx := context.Background()
	f := dockerclient.Filters{}.Add("label", "swebuild.verify")
	cs, err := e.Client.ContainerList(ctx, dockerclient.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Client.VolumeList(ctx, dockerclient.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	is, err := e.Client.ImageList(ctx, dockerclient.ImageListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d containers, %d volumes, %d images", len(cs.Items), len(vs.Items), len(is.Items))
}

// TestDockerEngineStack runs jobs on the stack's Docker daemon with an
// image the BuildKit tests push: both engines give the same run for the
// same job; the container has no network but loopback; a run over its
// timeout is cut and says so; a long output comes back as head and tail;
// no container, volume or image is left behind.
func TestDockerEngineStack(t *testing.T) {
	c, image := testImage(t)
	e := dockerEngine(t)
	ctx := context.Background()
	before := verifyLeftovers(t, e)

	t.Run("same as buildkit", func(t *testing.T) {
		eval := "#!/bin/bash\necho '" + grading.StartTestOutput + "'\ncat /testbed/a.txt\npwd\nid -u\necho \"PATH=$PATH\"\necho '" + grading.EndTestOutput + "'\n"
		job := testJob(t, image, eval)
		bk, err := (&BuildKitEngine{Client: c}).Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		job.Nonce += "-docker"
		dk, err := e.Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if dk.InfraError != "" || !dk.Applied || !dk.TestRan || dk.TestExit != 0 || dk.TimedOut {
			t.Fatalf("docker run: %+v", dk)
		}
		if dk.TestOutput != bk.TestOutput || dk.TestOutputSHA256 != bk.TestOutputSHA256 || dk.DiffBefore != bk.DiffBefore || dk.TestExit != bk.TestExit ||
			fmt.Sprint(dk.Attempts) != fmt.Sprint(bk.Attempts) || dk.Leak.Commits != bk.Leak.Commits || dk.Leak.Refs != bk.Leak.Refs {
			t.Errorf("engines differ:\nbuildkit %+v\ndocker   %+v", bk, dk)
		}
		if !strings.Contains(dk.TestOutput, "\ntwo\n") {
			t.Errorf("the patch was not applied in the container: %q", dk.TestOutput)
		}
	})

	t.Run("network none", func(t *testing.T) {
		job := testJob(t, image, "#!/bin/bash\nls /sys/class/net\n")
		out, err := e.Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(out.TestOutput); len(got) != 1 || got[0] != "lo" {
			t.Errorf("network interfaces %q, want only lo", got)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		job := testJob(t, image, "#!/bin/bash\necho started\nsleep 60\necho never\n")
		job.Timeout = 2 * time.Second
		begin := time.Now()
		out, err := e.Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if !out.TimedOut || out.TestExit != 124 || strings.Contains(out.TestOutput, "never") || time.Since(begin) > 45*time.Second {
			t.Errorf("timed-out run: exit %d, timed out %v, output %q, took %s", out.TestExit, out.TimedOut, out.TestOutput, time.Since(begin))
		}
	})

	t.Run("long output", func(t *testing.T) {
		const size = 40 << 20
		line := fmt.Sprintf("%063d", 0)
		job := testJob(t, image, "#!/bin/bash\nyes "+line+" | head -c "+fmt.Sprint(size)+"\necho 'last line'\n")
		job.MaxOutput = 4 << 20
		out, err := e.Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		total := int64(size + len("last line\n"))
		if out.TestOutputSize != total || out.TestOutputOmitted <= total-(4<<20) || !strings.HasSuffix(out.TestOutput, line+"\nlast line\n") ||
			int64(len(out.TestOutput)) > 4<<20+200 {
			t.Errorf("40 MiB output: size %d (want %d), %d omitted, %d bytes back", out.TestOutputSize, total, out.TestOutputOmitted, len(out.TestOutput))
		}
	})

	if after := verifyLeftovers(t, e); after != before {
		t.Errorf("the engine's label on the daemon: %s after the runs, %s before", after, before)
	}
}

// TestDockerEngineWrongPlatform: an image asked for a platform it does not
// have is an error naming the platform, not a run of another architecture.
func TestDockerEngineWrongPlatform(t *testing.T) {
	stacktest.Thorough(t)
	_, image := testImageFor(t, core.AMD64)
	e := dockerEngine(t)
	job := testJob(t, image, "#!/bin/bash\nuname -m\n")
	job.Platform = core.ARM64
	out, err := e.Run(context.Background(), job)
	if err == nil || !strings.Contains(err.Error(), "linux/arm64") {
		t.Fatalf("an amd64 image run as linux/arm64: err %v, output %+v", err, out)
	}
	t.Logf("error: %v", err)
}

// TestNewDockerEngineNoDaemon: an address where no daemon answers is an
// error naming it, before any run.
func TestNewDockerEngineNoDaemon(t *testing.T) {
	for _, host := range []string{"unix://" + t.TempDir() + "/docker.sock", "tcp://127.0.0.1:1", "ftp://example"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		e, err := NewDockerEngine(ctx, host)
		cancel()
		if err == nil {
			e.Close()
			t.Errorf("%s: connected", host)
			continue
		}
		if !strings.Contains(err.Error(), host) {
			t.Errorf("%s: error %q does not name the address", host, err)
		}
	}
}

// TestNewDockerEngineSilentDaemon: an address that accepts connections and
// never answers (a unix socket and a TCP port) is an error naming it within
// DockerPingTimeout, not a wait for ever (issue 28, row "Low").
func TestNewDockerEngineSilentDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				_, _ = io.Copy(io.Discard, c) // read, never answer
			}()
		}
	}()
	hosts := []string{"unix://" + sock, "tcp://" + faultproxy.Silent(t)}
	errs := make([]error, len(hosts))
	took := make([]time.Duration, len(hosts))
	var wg sync.WaitGroup
	for i, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			begin := time.Now()
			e, err := NewDockerEngine(context.Background(), host)
			if e != nil {
				e.Close()
			}
			errs[i], took[i] = err, time.Since(begin)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(DockerPingTimeout + 2*time.Minute):
		t.Fatalf("NewDockerEngine still waiting %s after its %s limit", 2*time.Minute, DockerPingTimeout)
	}
	for i, host := range hosts {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), host) || !strings.Contains(errs[i].Error(), "no answer within") {
			t.Errorf("%s: error %v after %s, want one naming the address and the limit", host, errs[i], took[i])
		}
		t.Logf("%s: %v (after %s)", host, errs[i], took[i].Round(time.Millisecond))
	}
}
