package builder

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	bkclient "github.com/moby/buildkit/client"
)

// StepError is a node that failed in one build step: which step, what it
// printed last, and, when the step could not reach a host (the first thing a
// real SWE-bench build does without the network: pulling the base image,
// downloading Miniconda or conda packages, cloning from GitHub), which host.
// A user sees the host at the front of the error, in the summary and at the
// end of the node's log, rather than at the end of a chain of BuildKit
// messages or only in the middle of the step's output.
type StepError struct {
	// Step is the BuildKit vertex that failed, e.g. "[3/3] RUN /bin/bash
	// /root/setup_repo.sh" or "[internal] load metadata for
	// docker.io/library/ubuntu:22.04".
	Step string
	// StepErr is the vertex's error as BuildKit reported it.
	StepErr string
	// Host is the host the step could not reach; empty when the failure
	// does not look like a network failure.
	Host string
	// Evidence is the line (of the step's output or error) naming Host.
	Evidence string
	// LastOutput is the last non-empty line the step printed.
	LastOutput string
	// Err is the build's error.
	Err error
}

func (e *StepError) Error() string {
	if e.Host != "" {
		s := fmt.Sprintf("needs the network: cannot reach %s, in %s: %s", e.Host, e.Step, e.Evidence)
		if isLocalRegistry(e.Host) {
			// Not the network: a service on this machine (the stack's
			// registry) that is not running.
			s = fmt.Sprintf("cannot reach %s on this machine (is the service there running?), in %s: %s", e.Host, e.Step, e.Evidence)
		}
		if e.StepErr != "" && !strings.Contains(e.Evidence, e.StepErr) {
			s += " (" + e.StepErr + ")"
		}
		return s
	}
	msg := e.StepErr
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	s := e.Step + ": " + msg
	if e.LastOutput != "" && !strings.Contains(msg, e.LastOutput) {
		s += fmt.Sprintf("; last output: %q", e.LastOutput)
	}
	return s
}

func (e *StepError) Unwrap() error { return e.Err }

// UnreachableHost returns the host a failed build could not reach, or "".
func UnreachableHost(err error) string {
	var se *StepError
	if errors.As(err, &se) {
		return se.Host
	}
	return ""
}

// explain turns the error of a failed build into a *StepError naming the
// step that failed (from the vertices tr saw) and the host it could not
// reach. A build that failed outside any step (say, a Dockerfile that does
// not parse) keeps its error, with the host in front when the error names
// one.
func explain(err error, tr *tracker) error {
	if err == nil {
		return nil
	}
	step, stepErr, output, ok := tr.failedStep()
	if !ok {
		if host, line := findHost([]string{err.Error()}); host != "" {
			return &StepError{Step: "the build", StepErr: err.Error(), Host: host, Evidence: line, Err: err}
		}
		return err
	}
	se := &StepError{Step: step, StepErr: stepErr, Err: err}
	for i := len(output) - 1; i >= 0; i-- {
		if strings.TrimSpace(output[i]) != "" {
			se.LastOutput = strings.TrimSpace(output[i])
			break
		}
	}
	// The step's own error first (a pull names its registry there), then
	// what the step printed (a RUN step only says its exit code).
	se.Host, se.Evidence = findHost(append([]string{stepErr}, output...))
	return se
}

// hostPatterns recognize the messages tools print when they cannot reach a
// host; the first group is the host, or a URL holding it. The messages are
// those of the tools real SWE-bench builds run, as they print them:
//
//	git, curl:  fatal: unable to access 'https://github.com/django/django/': Could not resolve host: github.com
//	            curl: (7) Failed to connect to github.com port 443 after 2 ms: Connection refused
//	wget:       Resolving repo.anaconda.com (repo.anaconda.com)... failed: Name or service not known.
//	            wget: unable to resolve host address ‘repo.anaconda.com’
//	conda:      CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://repo.anaconda.com/pkgs/main/linux-64/repodata.json>
//	urllib3 2:  NameResolutionError(...: Failed to resolve 'conda.anaconda.org' ([Errno -2] Name or service not known)")
//	urllib3 1:  HTTPSConnectionPool(host='pypi.org', port=443): Max retries exceeded ...
//	apt:        Temporary failure resolving 'archive.ubuntu.com'
//	node, npm:  getaddrinfo ENOTFOUND registry.npmjs.org
//	Go (BuildKit pulling an image, go get):
//	            failed to do request: Head "https://registry-1.docker.io/v2/library/ubuntu/manifests/22.04": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host
var hostPatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`Could not resolve host: ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`Failed to connect to ([A-Za-z0-9.-]+) port`),
		regexp.MustCompile(`unable to resolve host address ['‘"]?([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`Resolving ([A-Za-z0-9.-]+) \([^)]*\)\.\.\. failed`),
		regexp.MustCompile(`CONNECTION FAILED for url <([^>]+)>`),
		regexp.MustCompile(`Failed to resolve '([A-Za-z0-9.-]+)'`),
		regexp.MustCompile(`ConnectionPool\(host='([A-Za-z0-9.-]+)'`),
		regexp.MustCompile(`(?:Temporary failure resolving|Could not resolve|Could not connect to) '([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`getaddrinfo (?:ENOTFOUND|EAI_AGAIN) ([A-Za-z0-9.-]+)`),
		regexp.MustCompile(`lookup ([A-Za-z0-9.-]+)(?: on [^ ]+)?: (?:no such host|server misbehaving|i/o timeout|Temporary failure)`),
	}
})

// networkFailure matches messages that say a connection failed without a
// pattern above naming the host; the host is then taken from a URL on the
// same line.
var (
	networkFailure = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)no such host|name resolution|name or service not known|could not resolve|network is unreachable|no route to host|connection refused|connection timed out|i/o timeout|tls handshake timeout`)
	})
	urlPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`https?://[^\s"'<>]+`) })
)

// findHost returns the first host the lines say could not be reached, and
// the line saying so (trimmed).
func findHost(lines []string) (host, line string) {
	for _, l := range lines {
		for _, re := range hostPatterns() {
			if m := re.FindStringSubmatch(l); m != nil {
				if h := hostOf(m[1]); h != "" {
					return h, strings.TrimSpace(l)
				}
			}
		}
	}
	for _, l := range lines {
		if !networkFailure().MatchString(l) {
			continue
		}
		if u := urlPattern().FindString(l); u != "" {
			if h := hostOf(u); h != "" {
				return h, strings.TrimSpace(l)
			}
		}
	}
	return "", ""
}

// hostOf returns s when it is a host name, or the host of s when it is a
// URL.
func hostOf(s string) string {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return ""
		}
		return u.Hostname()
	}
	return strings.TrimSuffix(s, ".")
}

// Output kept per vertex for explaining a failure: the last maxTailLines
// lines, each cut to maxLineBytes.
const (
	maxTailLines = 40
	maxLineBytes = 1024
)

// tail keeps the last lines of one vertex's output.
type tail struct {
	lines   []string
	partial []byte
}

func (t *tail) write(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			if len(t.partial) < maxLineBytes {
				t.partial = append(t.partial, b[:min(len(b), maxLineBytes-len(t.partial))]...)
			}
			return
		}
		if len(t.partial) < maxLineBytes {
			t.partial = append(t.partial, b[:min(i, maxLineBytes-len(t.partial))]...)
		}
		t.add(string(t.partial))
		t.partial = t.partial[:0]
		b = b[i+1:]
	}
}

func (t *tail) add(l string) {
	if l == "" {
		return
	}
	if len(t.lines) == maxTailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:maxTailLines-1]
	}
	t.lines = append(t.lines, l)
}

func (t *tail) all() []string {
	out := append([]string(nil), t.lines...)
	if len(t.partial) > 0 {
		out = append(out, string(t.partial))
	}
	return out
}

// failedStep returns the vertex whose error failed the build: the earliest
// completed vertex with an error, preferring any error over a cancellation
// (BuildKit cancels the steps running beside the one that failed).
func (t *tracker) failedStep() (name, errText string, output []string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var (
		best     *bkclient.Vertex
		bestTime time.Time
		bestCanc bool
	)
	for _, v := range t.vertices {
		if v.Error == "" {
			continue
		}
		canceled := strings.Contains(v.Error, "context canceled") || strings.HasSuffix(v.Error, "canceled")
		var at time.Time
		if v.Completed != nil {
			at = *v.Completed
		}
		switch {
		case best == nil:
		case bestCanc && !canceled:
		case canceled && !bestCanc:
			continue
		case !at.Before(bestTime):
			continue
		}
		best, bestTime, bestCanc = v, at, canceled
	}
	if best == nil {
		return "", "", nil, false
	}
	if tl := t.logs[best.Digest]; tl != nil {
		output = tl.all()
	}
	return best.Name, best.Error, output, true
}
