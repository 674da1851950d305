package builder

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// tinyGraph is a graph that builds offline: FROM scratch images made of
// COPY'd files. env.bad copies a file its context lacks, so it fails, and so
// must its instance, but nothing else.
func tinyGraph(t *testing.T, platforms []core.Platform, salt string) []*graph.Node {
	dir := t.TempDir()
	for _, f := range []string{"payload.bin", "stray.bin"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f+salt), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory reached through a symlink under another name.
	if err := os.MkdirAll(filepath.Join(dir, "payload-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "payload-dir", "f.txt"), []byte("f"+salt), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(filepath.Join(dir, "payload-dir"), link); err != nil {
		t.Fatal(err)
	}
	var nodes []*graph.Node
	for _, p := range platforms {
		arch := p.Arch()
		baseKey := "swebuild-test.base." + arch + ":latest"
		envKey := "swebuild-test.env." + arch + ".good:latest"
		badKey := "swebuild-test.env." + arch + ".bad:latest"
		nodes = append(nodes,
			&graph.Node{Key: baseKey, Kind: graph.KindBase, Platform: p,
				Dockerfile:   []byte("FROM scratch\nCOPY payload.bin /base/payload.bin\nCOPY base.txt /base/\n"),
				Context:      map[string][]byte{"base.txt": []byte("base " + arch + salt)},
				ContextFiles: map[string]string{"payload.bin": filepath.Join(dir, "payload.bin")}},
			&graph.Node{Key: envKey, Kind: graph.KindEnv, Platform: p, Parents: []string{baseKey},
				Dockerfile: []byte("FROM --platform=" + p.String() + " " + baseKey + "\nCOPY setup_env.sh /root/\n"),
				Context:    map[string][]byte{"setup_env.sh": []byte("echo env " + arch + "\n")}},
			&graph.Node{Key: badKey, Kind: graph.KindEnv, Platform: p, Parents: []string{baseKey},
				Dockerfile: []byte("FROM " + strings.TrimSuffix(baseKey, ":latest") + "\nCOPY not-in-context.sh /root/\n"),
				Context:    map[string][]byte{"setup_env.sh": []byte("x")}},
			&graph.Node{Key: "swebuild-test.eval." + arch + ".good:latest", Kind: graph.KindInstance, Platform: p, InstanceID: "good__good-1", Parents: []string{envKey},
				Dockerfile:   []byte("FROM " + envKey + "\nCOPY setup_repo.sh /root/\nCOPY data /data\nWORKDIR /testbed\n"),
				Context:      map[string][]byte{"setup_repo.sh": []byte("echo repo good\n")},
				ContextFiles: map[string]string{"data": link}},
			&graph.Node{Key: "swebuild-test.eval." + arch + ".bad:latest", Kind: graph.KindInstance, Platform: p, InstanceID: "bad__bad-1", Parents: []string{badKey},
				Dockerfile: []byte("FROM " + badKey + "\nCOPY setup_repo.sh /root/\n"),
				Context:    map[string][]byte{"setup_repo.sh": []byte("echo repo bad\n")}},
		)
	}
	return nodes
}

func TestBuildKitGraph(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	host, reg := st.BuildkitHost, st.Registry
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	r, err := connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	native := r.native
	r.c.Close()

	plats := core.AllPlatforms()
	salt := time.Now().Format(time.RFC3339Nano) // a cold first run
	nodes := tinyGraph(t, plats, salt)
	opts := Options{Builders: []BuilderSpec{{Addr: host}}, Workers: 3, RunDir: t.TempDir(), Progress: "quiet"}
	if reg != "" {
		opts.Push = reg + "/swebuild-test/build"
	}

	rep, err := Build(ctx, nodes, opts)
	if rep == nil {
		t.Fatalf("Build: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "4 of 10 nodes failed") {
		t.Errorf("Build error %v, want 4 of 10 nodes failed", err)
	}
	var sb strings.Builder
	rep.WriteSummary(&sb)
	t.Logf("first run:\n%s", sb.String())
	for _, res := range rep.Results {
		n := res.Node
		bad := strings.Contains(n.Key, ".bad")
		switch {
		case bad && n.Kind == graph.KindEnv:
			if res.Status != StatusFailed || !strings.Contains(res.Err.Error(), "not-in-context.sh") {
				t.Errorf("%s: %s %v, want failed naming not-in-context.sh", n.ID(), res.Status, res.Err)
			}
		case bad:
			if res.Status != StatusSkipped || !strings.Contains(res.Err.Error(), "dependency swebuild-test.env."+n.Arch()+".bad:latest@"+n.Platform.String()+" failed") {
				t.Errorf("%s: %s %v, want skipped naming its env", n.ID(), res.Status, res.Err)
			}
		default:
			if res.Status != StatusDone {
				t.Errorf("%s: %s %v", n.ID(), res.Status, res.Err)
				continue
			}
			if !strings.HasPrefix(res.Outcome.Digest, "sha256:") {
				t.Errorf("%s: digest %q", n.ID(), res.Outcome.Digest)
			}
			if want := n.Platform == native; res.Outcome.Native != want {
				t.Errorf("%s: native %v, want %v (worker native %v)", n.ID(), res.Outcome.Native, want, native)
			}
			if res.Outcome.Cached {
				t.Errorf("%s: cached on a cold run", n.ID())
			}
		}
		if res.LogPath == "" && res.Status != StatusSkipped {
			t.Errorf("%s: no log", n.ID())
		} else if res.LogPath != "" {
			b, err := os.ReadFile(res.LogPath)
			if err != nil || !strings.Contains(string(b), n.ID()) {
				t.Errorf("%s: log %s: %v %q", n.ID(), res.LogPath, err, b)
			}
			// BuildKit's exporter checks the result's platform against the
			// request's: the request must name the node's platform.
			if strings.Contains(string(b), "does not match result platform") {
				t.Errorf("%s: log warns of a platform mismatch:\n%s", n.ID(), b)
			}
		}
	}
	first := map[string]string{}
	for _, res := range rep.Results {
		first[res.Node.ID()] = res.Outcome.Digest
	}
	if first["swebuild-test.base.x86_64:latest@linux/amd64"] == first["swebuild-test.base.arm64:latest@linux/arm64"] {
		t.Error("amd64 and arm64 bases have the same digest")
	}

	// Second run of the same graph: every good node fully cached, same digests.
	rep2, _ := Build(ctx, nodes, opts)
	sb.Reset()
	rep2.WriteSummary(&sb)
	t.Logf("second run:\n%s", sb.String())
	for _, res := range rep2.Results {
		if res.Status != StatusDone {
			continue
		}
		if !res.Outcome.Cached {
			t.Errorf("second run: %s not cached", res.Node.ID())
		}
		if res.Outcome.Digest != first[res.Node.ID()] {
			t.Errorf("second run: %s digest %s, first %s", res.Node.ID(), res.Outcome.Digest, first[res.Node.ID()])
		}
	}

	if reg == "" {
		return
	}
	// The pushed instance image holds exactly the files its Dockerfiles
	// copied: no stray context files, no Dockerfile.
	for _, res := range rep.Results {
		if res.Node.Kind != graph.KindInstance || res.Status != StatusDone {
			continue
		}
		files := imageFiles(t, res.Outcome.Ref)
		want := []string{"base/base.txt", "base/payload.bin", "data/f.txt", "root/setup_env.sh", "root/setup_repo.sh", "testbed"}
		var got []string
		for _, f := range files {
			f = strings.TrimSuffix(f, "/")
			if f == "base" || f == "root" || f == "data" {
				continue
			}
			got = append(got, f)
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: image files %v, want %v", res.Node.ID(), got, want)
		}
	}
}

// imageFiles lists the paths in every layer of the image at ref.
func imageFiles(t *testing.T, ref string) []string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ggcrremote.Image(r)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, strings.TrimPrefix(h.Name, "./"))
		}
		rc.Close()
	}
	return out
}
