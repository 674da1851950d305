package builder

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sync"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/util/progress/progressui"
	digest "github.com/opencontainers/go-digest"
)

// progressHub merges the status streams of concurrent solves into one
// terminal display (BuildKit's progressui) and also writes each node's stream
// to its own log file in plain mode.
type progressHub struct {
	ch   chan *bkclient.SolveStatus // nil: no terminal display
	done chan struct{}
}

// newProgressHub starts the terminal display; out nil or mode "quiet" shows
// nothing.
func newProgressHub(ctx context.Context, out io.Writer, mode string) (*progressHub, error) {
	h := &progressHub{done: make(chan struct{})}
	if out == nil || mode == "quiet" {
		close(h.done)
		return h, nil
	}
	d, err := progressui.NewDisplay(out, progressui.DisplayMode(mode))
	if err != nil {
		return nil, fmt.Errorf("starting %s progress display: %w", mode, err)
	}
	h.ch = make(chan *bkclient.SolveStatus, 64)
	go func() {
		defer close(h.done)
		// The display must drain h.ch until it is closed, even when ctx
		// ends, so solves never block on it.
		_, _ = d.UpdateFrom(context.WithoutCancel(ctx), h.ch)
	}()
	return h, nil
}

// close ends the terminal display and waits for its last frame.
func (h *progressHub) close() {
	if h.ch != nil {
		close(h.ch)
	}
	<-h.done
}

// attach consumes one solve's status channel ch (closed by BuildKit when the
// solve ends): it feeds the tracker, a plain display into log, and the
// terminal display with vertex names prefixed by label. The returned wait
// blocks until ch is drained and the log display has finished.
func (h *progressHub) attach(ctx context.Context, label string, log io.Writer, tr *tracker, ch chan *bkclient.SolveStatus) (wait func() error) {
	logDisplay, err := progressui.NewDisplay(log, progressui.PlainMode)
	if err != nil {
		// Plain mode never fails; keep the status channel drained anyway.
		go func() {
			for ss := range ch {
				tr.update(ss)
			}
		}()
		return func() error { return err }
	}
	logCh := make(chan *bkclient.SolveStatus, 16)
	displayDone := make(chan error, 1)
	go func() {
		_, err := logDisplay.UpdateFrom(context.WithoutCancel(ctx), logCh)
		displayDone <- err
	}()
	fwdDone := make(chan struct{})
	go func() {
		defer close(fwdDone)
		defer close(logCh)
		for ss := range ch {
			tr.update(ss)
			logCh <- ss
			if h.ch != nil {
				h.ch <- relabel(label, ss)
			}
		}
	}()
	return func() error {
		<-fwdDone
		return <-displayDone
	}
}

// relabel copies ss for the shared display: vertex digests are made unique
// per node (two nodes solving the same ancestor must not share a row) and
// names get the node label.
func relabel(label string, ss *bkclient.SolveStatus) *bkclient.SolveStatus {
	m := func(d digest.Digest) digest.Digest { return digest.FromString(label + "\x00" + d.String()) }
	out := &bkclient.SolveStatus{}
	for _, v := range ss.Vertexes {
		c := *v
		c.Digest = m(v.Digest)
		c.Inputs = nil
		for _, in := range v.Inputs {
			c.Inputs = append(c.Inputs, m(in))
		}
		c.Name = "[" + label + "] " + v.Name
		out.Vertexes = append(out.Vertexes, &c)
	}
	for _, s := range ss.Statuses {
		c := *s
		c.Vertex = m(s.Vertex)
		out.Statuses = append(out.Statuses, &c)
	}
	for _, l := range ss.Logs {
		c := *l
		c.Vertex = m(l.Vertex)
		out.Logs = append(out.Logs, &c)
	}
	for _, w := range ss.Warnings {
		c := *w
		c.Vertex = m(w.Vertex)
		out.Warnings = append(out.Warnings, &c)
	}
	return out
}

// stepName matches the vertices of Dockerfile instructions, e.g.
// "[2/5] RUN ..." or "[stage 1/3] COPY ...".
var stepName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[[^\]]*\b\d+/\d+\] `) })

// tracker follows the vertices of one solve to tell whether every
// Dockerfile step was a cache hit, and keeps the last lines of each
// vertex's output so that a failure can be explained (explain).
type tracker struct {
	mu       sync.Mutex
	vertices map[digest.Digest]*bkclient.Vertex
	logs     map[digest.Digest]*tail
}

func newTracker() *tracker {
	return &tracker{vertices: map[digest.Digest]*bkclient.Vertex{}, logs: map[digest.Digest]*tail{}}
}

func (t *tracker) update(ss *bkclient.SolveStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range ss.Vertexes {
		c := *v
		t.vertices[v.Digest] = &c
	}
	for _, l := range ss.Logs {
		tl := t.logs[l.Vertex]
		if tl == nil {
			tl = &tail{}
			t.logs[l.Vertex] = tl
		}
		tl.write(l.Data)
	}
}

// steps counts the Dockerfile steps that completed, and of them the cache
// hits.
func (t *tracker) steps() (done, cached int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range t.vertices {
		if v.Completed == nil || !stepName().MatchString(v.Name) {
			continue
		}
		done++
		if v.Cached {
			cached++
		}
	}
	return done, cached
}

// cached reports whether at least one Dockerfile step completed and all that
// completed were cache hits.
func (t *tracker) cached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	steps := 0
	for _, v := range t.vertices {
		if v.Completed == nil || !stepName().MatchString(v.Name) {
			continue
		}
		steps++
		if !v.Cached {
			return false
		}
	}
	return steps > 0
}
