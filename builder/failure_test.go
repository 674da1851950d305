package builder

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"
	digest "github.com/opencontainers/go-digest"
)

// The lines are what the tools printed when run on this offline machine
// (git, curl, wget, pip, BuildKit), or, for conda, which is not installable
// offline, what conda users reported in conda/conda issues #9948 and #13866.
func TestFindHost(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"git clone", []string{"Cloning into '/testbed'...", "fatal: unable to access 'https://github.com/django/django/': Could not resolve host: github.com"}, "github.com"},
		{"curl", []string{"curl: (6) Could not resolve host: repo.anaconda.com"}, "repo.anaconda.com"},
		{"curl refused", []string{"curl: (7) Failed to connect to github.com port 443 after 3 ms: Couldn't connect to server"}, "github.com"},
		{"wget", []string{
			"--2026-12-01 02:42:15--  https://repo.anaconda.com/miniconda/Miniconda3-py311_23.11.0-2-Linux-x86_64.sh",
			"Resolving repo.anaconda.com (repo.anaconda.com)... failed: Name or service not known.",
			"wget: unable to resolve host address ‘repo.anaconda.com’",
		}, "repo.anaconda.com"},
		{"conda", []string{
			"Collecting package metadata (repodata.json): failed",
			"",
			"CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda.anaconda.org/conda-forge/linux-64/repodata.json>",
			"Elapsed: -",
		}, "conda.anaconda.org"},
		{"urllib3 2", []string{`Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NameResolutionError("<urllib3.connection.HTTPSConnection object at 0x7f99d46146e0>: Failed to resolve 'conda.anaconda.org' ([Errno -2] Name or service not known)")': /conda-forge/noarch/repodata.json.zst`}, "conda.anaconda.org"},
		{"urllib3 1", []string{`ConnectionError(MaxRetryError("HTTPSConnectionPool(host='repo.continuum.io', port=443): Max retries exceeded with url: /pkgs/free/noarch/repodata.json.bz2 (Caused by NewConnectionError('<urllib3.connection.VerifiedHTTPSConnection object at 0x7f4e77c5da20>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution',))",),)`}, "repo.continuum.io"},
		{"apt", []string{"Err:1 http://archive.ubuntu.com/ubuntu jammy InRelease", "  Temporary failure resolving 'archive.ubuntu.com'"}, "archive.ubuntu.com"},
		{"npm", []string{"npm ERR! request to https://registry.npmjs.org/left-pad failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org"}, "registry.npmjs.org"},
		{"buildkit pull", []string{`failed to do request: Head "https://registry-1.docker.io/v2/library/ubuntu/manifests/22.04": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host`}, "registry-1.docker.io"},
		{"go timeout with a URL", []string{`failed to do request: Head "https://registry-1.docker.io/v2/library/rust/manifests/1.83": dial tcp 52.1.1.1:443: i/o timeout`}, "registry-1.docker.io"},
		// pip names no host when it cannot resolve one; the path alone is
		// not a host.
		{"pip", []string{"WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f58a2f19650>: Failed to establish a new connection: [Errno -2] Name or service not known')': /simple/numpy/"}, ""},
		{"not a network failure", []string{"E: Unable to locate package nosuchpackage", "see https://example.org/docs"}, ""},
		{"exit code only", []string{`process "/bin/sh -c /bin/bash /root/setup_repo.sh" did not complete successfully: exit code: 128`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, line := findHost(tt.lines)
			if got != tt.want {
				t.Fatalf("findHost = %q (line %q), want %q", got, line, tt.want)
			}
			if got != "" && !strings.Contains(line, got) && !strings.Contains(line, "CONNECTION FAILED") {
				t.Errorf("evidence %q does not name %s", line, got)
			}
		})
	}
}

func TestTailKeepsLastLines(t *testing.T) {
	var tl tail
	tl.write([]byte("one\r\ntw"))
	tl.write([]byte("o\nthree"))
	if got := strings.Join(tl.all(), "|"); got != "one|two|three" {
		t.Errorf("lines %q", got)
	}
	tl = tail{}
	for i := range maxTailLines + 5 {
		tl.write(fmt.Appendf(nil, "line %d\n", i))
	}
	all := tl.all()
	if len(all) != maxTailLines || all[0] != "line 5" || all[len(all)-1] != fmt.Sprintf("line %d", maxTailLines+4) {
		t.Errorf("kept %d lines %q..%q", len(all), all[0], all[len(all)-1])
	}
	tl = tail{}
	tl.write([]byte(strings.Repeat("x", 3*maxLineBytes) + "\n"))
	if got := tl.all(); len(got) != 1 || len(got[0]) != maxLineBytes {
		t.Errorf("long line kept as %d lines of %d bytes", len(got), len(got[0]))
	}
}

// status builds a SolveStatus the way BuildKit streams one.
func vertexStatus(name, errText string, completed time.Time, logs ...string) *bkclient.SolveStatus {
	d := digest.FromString(name)
	ss := &bkclient.SolveStatus{Vertexes: []*bkclient.Vertex{{Digest: d, Name: name, Completed: &completed, Error: errText}}}
	for _, l := range logs {
		ss.Logs = append(ss.Logs, &bkclient.VertexLog{Vertex: d, Data: []byte(l)})
	}
	return ss
}

func TestExplain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bkErr := errors.New(`failed to solve: process "/bin/sh -c /bin/bash /root/setup_repo.sh" did not complete successfully: exit code: 128`)

	t.Run("RUN step that needed the network", func(t *testing.T) {
		tr := newTracker()
		tr.update(vertexStatus("[2/4] RUN sed -i -e 's/\\r$//' /root/setup_repo.sh", "", t0))
		tr.update(vertexStatus("[3/4] RUN /bin/bash /root/setup_repo.sh", `process "/bin/sh -c /bin/bash /root/setup_repo.sh" did not complete successfully: exit code: 128`, t0.Add(time.Second),
			"+ git clone -o origin --single-branch https://github.com/django/django /testbed\nCloning into '/testbed'...\n",
			"fatal: unable to access 'https://github.com/django/django/': Could not resolve host: github.com\n"))
		// A step BuildKit cancelled because the other failed first.
		tr.update(vertexStatus("[internal] other", "context canceled", t0))
		err := explain(bkErr, tr)
		var se *StepError
		if !errors.As(err, &se) {
			t.Fatalf("explain = %T %v", err, err)
		}
		if se.Host != "github.com" || se.Step != "[3/4] RUN /bin/bash /root/setup_repo.sh" {
			t.Errorf("host %q step %q", se.Host, se.Step)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "needs the network: cannot reach github.com, in [3/4] RUN /bin/bash /root/setup_repo.sh: fatal: unable to access") || !strings.Contains(msg, "exit code: 128") {
			t.Errorf("message %q", msg)
		}
		if !errors.Is(err, bkErr) || UnreachableHost(fmt.Errorf("node x: %w", err)) != "github.com" {
			t.Error("the BuildKit error or the host is lost through wrapping")
		}
	})

	t.Run("step that failed for another reason", func(t *testing.T) {
		tr := newTracker()
		tr.update(vertexStatus("[2/2] RUN make", `process "/bin/sh -c make" did not complete successfully: exit code: 2`, t0,
			"cc -o x x.c\n", "make: *** [Makefile:2: x] Error 1\n"))
		err := explain(errors.New("failed to solve: exit code 2"), tr)
		if UnreachableHost(err) != "" {
			t.Errorf("host %q for a compile error", UnreachableHost(err))
		}
		want := `[2/2] RUN make: process "/bin/sh -c make" did not complete successfully: exit code: 2; last output: "make: *** [Makefile:2: x] Error 1"`
		if err.Error() != want {
			t.Errorf("message\n%s\nwant\n%s", err, want)
		}
	})

	t.Run("no step failed", func(t *testing.T) {
		plain := errors.New("failed to solve: dockerfile parse error on line 1: unknown instruction: FORM")
		if err := explain(plain, newTracker()); err != plain {
			t.Errorf("explain changed %v into %v", plain, err)
		}
	})

	t.Run("a registry on this machine that is down", func(t *testing.T) {
		// What BuildKit's exporter says when the push registry is not
		// running (the text of a push to a port nobody listens on).
		down := errors.New(`failed to solve: failed to push 127.0.0.1:5999/swebuild/build: failed to do request: Head "http://127.0.0.1:5999/v2/swebuild/build/blobs/sha256:3ad7fd042be3a1f5c2c67d51a5bf47c1fd2a4ff6c8b5cd5a6d7d6bb55f5a0b2c": dial tcp 127.0.0.1:5999: connect: connection refused`)
		err := explain(down, newTracker())
		msg := err.Error()
		if UnreachableHost(err) != "127.0.0.1" || strings.Contains(msg, "needs the network") || !strings.Contains(msg, "cannot reach 127.0.0.1 on this machine (is the service there running?)") {
			t.Errorf("message %q", msg)
		}
	})

	t.Run("the earliest failure wins", func(t *testing.T) {
		tr := newTracker()
		tr.update(vertexStatus("[internal] load metadata for docker.io/library/rust:1.83", `failed to do request: Head "https://registry-1.docker.io/v2/library/rust/manifests/1.83": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host`, t0))
		tr.update(vertexStatus("[internal] load metadata for ghcr.io/x/y:1", `failed to do request: Head "https://ghcr.io/v2/x/y/manifests/1": dial tcp: lookup ghcr.io on 10.255.255.53:53: no such host`, t0.Add(time.Second)))
		if h := UnreachableHost(explain(errors.New("failed to solve"), tr)); h != "registry-1.docker.io" {
			t.Errorf("host %q", h)
		}
	})
}
