package builder

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
	"github.com/swebuild/swebuild/pins"
)

// The tests in this file build real SWE-bench nodes on this offline machine
// and check that BuildKit accepts each solve and that the build fails exactly
// where the Dockerfile first needs the network, naming the host.

// TestBuildNodesWithoutContext builds, offline and to the end, nodes whose
// build context is empty, as upstream's base Dockerfiles are: a base that is
// FROM scratch with only metadata (an image with no layers, so its children
// get no parent ref from BuildKit either), a child copying one file, and an
// instance with no context at all. Before the empty context was given a real
// definition, the first solve failed with "failed to get frontend inputs:
// invalid nil input definition to definition op".
func TestBuildNodesWithoutContext(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	host, reg := st.BuildkitHost, st.Registry
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	salt := time.Now().UTC().Format(time.RFC3339Nano)
	var nodes []*graph.Node
	for _, p := range core.AllPlatforms() {
		base := "swebuild-test.noctx.base." + p.Arch() + ":latest"
		env := "swebuild-test.noctx.env." + p.Arch() + ":latest"
		nodes = append(nodes,
			&graph.Node{Key: base, Kind: graph.KindBase, Platform: p,
				Dockerfile: []byte("FROM scratch\nENV SWEBUILD_SALT=\"" + salt + "\"\n")},
			&graph.Node{Key: env, Kind: graph.KindEnv, Platform: p, Parents: []string{base},
				Dockerfile: []byte("FROM --platform=" + p.Dockerfile() + " " + base + "\nCOPY setup_env.sh /root/\n"),
				Context:    map[string][]byte{"setup_env.sh": []byte("echo " + salt + "\n")}},
			&graph.Node{Key: "swebuild-test.noctx.eval." + p.Arch() + ":latest", Kind: graph.KindInstance, Platform: p,
				InstanceID: "noctx__noctx-1", Parents: []string{env},
				Dockerfile: []byte("FROM " + env + "\nWORKDIR /testbed/\n")},
		)
	}
	opts := Options{Builders: []BuilderSpec{{Addr: host}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet"}
	if reg != "" {
		opts.Push = reg + "/swebuild-test/noctx"
	}
	digests := map[string]string{}
	for run := 1; run <= 2; run++ {
		rep, err := Build(ctx, nodes, opts)
		if rep == nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var sb strings.Builder
		_ = rep.WriteSummary(&sb)
		t.Logf("run %d:\n%s", run, sb.String())
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for _, res := range rep.Results {
			id := res.Node.ID()
			if !strings.HasPrefix(res.Outcome.Digest, "sha256:") {
				t.Errorf("run %d: %s: digest %q", run, id, res.Outcome.Digest)
			}
			if run == 1 {
				digests[id] = res.Outcome.Digest
			} else if res.Outcome.Digest != digests[id] {
				t.Errorf("run 2: %s: digest %s, first run %s", id, res.Outcome.Digest, digests[id])
			}
		}
	}
	if reg == "" {
		return
	}
	for _, n := range nodes {
		if n.Kind != graph.KindInstance {
			continue
		}
		ref := opts.Push + "@" + digests[n.ID()]
		files := imageFiles(t, ref)
		var got []string
		for _, f := range files {
			got = append(got, strings.TrimSuffix(f, "/"))
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if want := []string{"root", "root/setup_env.sh", "testbed"}; !slices.Equal(got, want) {
			t.Errorf("%s: files %v, want %v", n.ID(), got, want)
		}
	}
}

// upstreamMeta is the part of upstream's meta.json naming the image keys.
type upstreamMeta struct {
	InstanceID  string `json:"instance_id"`
	BaseKey     string `json:"base_image_key"`
	EnvKey      string `json:"env_image_key"`
	InstanceKey string `json:"instance_image_key"`
}

// realNodes returns the base, env and instance node of one instance and
// platform.
type realNodes func(t *testing.T, p core.Platform) (base, env, inst *graph.Node)

// fromUpstream makes the nodes from the files upstream v4.1.0 generated for
// the instance (pins off), in the shared reference data.
func fromUpstream(dir string) realNodes {
	return func(t *testing.T, p core.Platform) (base, env, inst *graph.Node) {
		t.Helper()
		d := filepath.Join(dir, p.Arch())
		read := func(name string) []byte {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		var m upstreamMeta
		if err := json.Unmarshal(read("meta.json"), &m); err != nil {
			t.Fatalf("%s: %v", filepath.Join(d, "meta.json"), err)
		}
		base = &graph.Node{Key: m.BaseKey, Kind: graph.KindBase, Platform: p, Dockerfile: read("Dockerfile.base")}
		env = &graph.Node{Key: m.EnvKey, Kind: graph.KindEnv, Platform: p, Parents: []string{m.BaseKey},
			Dockerfile: read("Dockerfile.env"), Context: map[string][]byte{"setup_env.sh": read("setup_env.sh")}}
		inst = &graph.Node{Key: m.InstanceKey, Kind: graph.KindInstance, Platform: p, InstanceID: m.InstanceID, Parents: []string{m.EnvKey},
			Dockerfile: read("Dockerfile.instance"), Context: map[string][]byte{"setup_repo.sh": read("setup_repo.sh")}}
		return base, env, inst
	}
}

// rendered makes the nodes the way swebuild build does, from the spec
// tables with the default pins.
func rendered(shared, split, id string) realNodes {
	return func(t *testing.T, p core.Platform) (base, env, inst *graph.Node) {
		t.Helper()
		tables, err := spec.Load()
		if err != nil {
			t.Fatal(err)
		}
		set, err := pins.Named("default")
		if err != nil {
			t.Fatal(err)
		}
		rec := spectest.Records(t, shared, split)[split][id]
		if rec == nil {
			t.Fatalf("%s is not in %s", id, split)
		}
		res, err := (&render.Renderer{Tables: tables, Pins: set}).Render(context.Background(), rec, p)
		if err != nil {
			t.Fatalf("rendering %s for %s: %v", id, p.Arch(), err)
		}
		var out [3]*graph.Node
		for i, rn := range res.Nodes() {
			if rn.Platform != p || len(rn.External) > 0 {
				t.Fatalf("rendered %s node for %s: platform %s, external files %v", rn.Kind, p, rn.Platform, rn.External)
			}
			out[i] = &rn
		}
		out[2].InstanceID = id
		return out[0], out[1], out[2]
	}
}

// standIn is a locally made image keyed as a real parent, so that the real
// child Dockerfile's FROM <parent key> resolves to it through the named
// context the builder binds every parent with. It is the offline fixture's
// Debian rootfs (bash, git, python3), plus the given files.
func standIn(t *testing.T, key string, kind graph.Kind, p core.Platform, rootfs string, files map[string][]byte) *graph.Node {
	t.Helper()
	tar := stacktest.RootfsTarName(p.GOARCH())
	df := "FROM scratch\nARG TARGETARCH\nADD rootfs-${TARGETARCH}.tar /\n"
	ctxFiles := map[string][]byte{}
	for name, data := range files {
		ctxFiles[filepath.Base(name)] = data
		df += "COPY --chmod=755 " + filepath.Base(name) + " " + name + "\n"
	}
	return &graph.Node{Key: key, Kind: kind, Platform: p, Dockerfile: []byte(df), Context: ctxFiles,
		ContextFiles: map[string]string{tar: filepath.Join(rootfs, tar)}}
}

// fromImage returns the image of the first FROM of a Dockerfile as a
// docker.io reference, e.g. "docker.io/library/ubuntu:22.04".
func fromImage(t *testing.T, dockerfile []byte) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^FROM (?:--platform=\S+ )?(\S+)`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatalf("no FROM in %q", dockerfile)
	}
	ref := string(m[1])
	if !strings.Contains(ref, "/") {
		ref = "library/" + ref
	}
	return "docker.io/" + ref
}

// wantNetworkFailure checks that res failed (not skipped: its own solve was
// accepted and ran) in a step whose name contains step, naming one of hosts,
// and that its log file says so too.
func wantNetworkFailure(t *testing.T, res Result, step string, hosts ...string) {
	t.Helper()
	id := res.Node.ID()
	if res.Status != StatusFailed {
		t.Errorf("%s: %s (%v), want failed", id, res.Status, res.Err)
		return
	}
	var se *StepError
	if !errors.As(res.Err, &se) {
		t.Errorf("%s: error names no failing step: %v", id, res.Err)
		return
	}
	if !strings.Contains(se.Step, step) {
		t.Errorf("%s: failed in step %q, want the step %q (the first that needs the network): %v", id, se.Step, step, res.Err)
	}
	if !slices.Contains(hosts, se.Host) {
		t.Errorf("%s: unreachable host %q, want one of %v: %v", id, se.Host, hosts, res.Err)
	}
	if want := "needs the network: cannot reach " + se.Host; !strings.Contains(res.Err.Error(), want) {
		t.Errorf("%s: error %q does not say %q", id, res.Err, want)
	}
	log, err := os.ReadFile(res.LogPath)
	if err != nil {
		t.Errorf("%s: log: %v", id, err)
	} else if !strings.Contains(string(log), "FAILED") || !strings.Contains(string(log), "cannot reach "+se.Host) {
		t.Errorf("%s: log %s does not end naming %s", id, res.LogPath, se.Host)
	}
	var sb strings.Builder
	_ = (&Report{Results: []Result{res}}).WriteSummary(&sb)
	if !strings.Contains(sb.String(), "failed: cannot reach "+se.Host) {
		t.Errorf("%s: summary does not name %s:\n%s", id, se.Host, sb.String())
	}
}

func buildAll(t *testing.T, ctx context.Context, host string, nodes []*graph.Node) map[string]Result {
	t.Helper()
	rep, err := Build(ctx, nodes, Options{Builders: []BuilderSpec{{Addr: host}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet"})
	if rep == nil {
		t.Fatalf("Build: %v", err)
	}
	var sb strings.Builder
	_ = rep.WriteSummary(&sb)
	t.Logf("\n%s", sb.String())
	out := map[string]Result{}
	for _, res := range rep.Results {
		out[res.Node.ID()] = res
	}
	return out
}

// TestRealProfileFailsAtFirstNetworkAccess builds the real base, env and
// instance nodes of a Verified instance, from upstream's own files (pins
// off) and as swebuild renders them (default pins), for both platforms. On
// this offline machine each solve must be accepted and fail at the first
// step that needs the network, naming the host:
//
//   - base: FROM ubuntu:22.04, pulled from docker.io;
//   - env: the RUN of setup_env.sh, whose conda downloads channel metadata.
//     The base cannot be built offline, so the env builds FROM a stand-in
//     keyed as the real base: the fixture's Debian rootfs with a conda
//     stand-in (testdata/standin/conda: conda is not installable offline)
//     that makes conda's first request, channel repodata, for real;
//   - instance: the RUN of setup_repo.sh, whose git clone reaches
//     github.com. The env cannot be built offline, so the instance builds
//     FROM a stand-in keyed as the real env: the fixture's Debian rootfs,
//     whose git is real.
func TestRealProfileFailsAtFirstNetworkAccess(t *testing.T) {
	stacktest.Thorough(t)
	host := stacktest.Require(t).BuildkitHost
	shared := spectest.SharedDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	conda, err := os.ReadFile(filepath.Join("testdata", "standin", "conda"))
	if err != nil {
		t.Fatal(err)
	}
	activate, err := os.ReadFile(filepath.Join("testdata", "standin", "activate"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "django__django-11099"
	profiles := []struct {
		name  string
		nodes realNodes
	}{
		{"upstream files, pins none", fromUpstream(filepath.Join(shared, "upstream-v4.1.0", "instances", id))},
		{"rendered, default pins", rendered(shared, "SWE-bench_Verified/test", id)},
	}
	for _, prof := range profiles {
		t.Run(prof.name, func(t *testing.T) {
			t.Run("base", func(t *testing.T) {
				var nodes []*graph.Node
				for _, p := range core.AllPlatforms() {
					base, _, _ := prof.nodes(t, p)
					if len(base.Context) > 0 || len(base.ContextFiles) > 0 {
						t.Fatalf("%s has context files: this test is about a base without any", base.ID())
					}
					nodes = append(nodes, base)
				}
				got := buildAll(t, ctx, host, nodes)
				for _, n := range nodes {
					wantNetworkFailure(t, got[n.ID()], "load metadata for "+fromImage(t, n.Dockerfile), "registry-1.docker.io")
				}
			})
			t.Run("env", func(t *testing.T) {
				rootfs := stacktest.Rootfs(t)
				var nodes, envs []*graph.Node
				for _, p := range core.AllPlatforms() {
					base, env, _ := prof.nodes(t, p)
					nodes = append(nodes, standIn(t, base.Key, graph.KindBase, p, rootfs,
						map[string][]byte{"/opt/miniconda3/bin/conda": conda, "/opt/miniconda3/bin/activate": activate}), env)
					envs = append(envs, env)
				}
				got := buildAll(t, ctx, host, nodes)
				for _, env := range envs {
					if res := got[env.Parents[0]+"@"+env.Platform.String()]; res.Status != StatusDone {
						t.Fatalf("stand-in base %s: %s %v", res.Node.ID(), res.Status, res.Err)
					}
					wantNetworkFailure(t, got[env.ID()], "/root/setup_env.sh\"", "repo.anaconda.com", "conda.anaconda.org")
				}
			})
			t.Run("instance", func(t *testing.T) {
				rootfs := stacktest.Rootfs(t)
				var nodes, insts []*graph.Node
				for _, p := range core.AllPlatforms() {
					_, env, inst := prof.nodes(t, p)
					nodes = append(nodes, standIn(t, env.Key, graph.KindEnv, p, rootfs, nil), inst)
					insts = append(insts, inst)
				}
				got := buildAll(t, ctx, host, nodes)
				for _, inst := range insts {
					if res := got[inst.Parents[0]+"@"+inst.Platform.String()]; res.Status != StatusDone {
						t.Fatalf("stand-in env %s: %s %v", res.Node.ID(), res.Status, res.Err)
					}
					wantNetworkFailure(t, got[inst.ID()], "RUN /bin/bash /root/setup_repo.sh", "github.com")
				}
			})
		})
	}
}

// TestOtherLanguageBasesFailAtFirstNetworkAccess builds the base of one
// real instance per non-Python language (SWE-bench Multilingual), from
// upstream's own files and as swebuild renders it from its tables (default
// pins), for both platforms: each solve must be accepted and fail pulling
// its image from docker.io.
func TestOtherLanguageBasesFailAtFirstNetworkAccess(t *testing.T) {
	stacktest.Thorough(t)
	host := stacktest.Require(t).BuildkitHost
	shared := spectest.SharedDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const split = "SWE-bench_Multilingual/test"
	ids := map[string]string{ // language -> instance
		"c":    "fmtlib__fmt-2310",
		"go":   "caddyserver__caddy-4774",
		"java": "apache__druid-14092",
		"js":   "axios__axios-4731",
		"php":  "briannesbitt__carbon-2981",
		"rb":   "faker-ruby__faker-2970",
		"rs":   "astral-sh__ruff-15330",
	}
	profiles := []struct {
		name  string
		nodes func(id string) realNodes
	}{
		{"upstream files, pins none", func(id string) realNodes {
			return fromUpstream(filepath.Join(shared, "upstream-v4.1.0-multilingual", "instances", id))
		}},
		{"rendered, default pins", func(id string) realNodes { return rendered(shared, split, id) }},
	}
	for _, prof := range profiles {
		t.Run(prof.name, func(t *testing.T) {
			var nodes []*graph.Node
			for _, lang := range slices.Sorted(maps.Keys(ids)) {
				for _, p := range core.AllPlatforms() {
					base, _, _ := prof.nodes(ids[lang])(t, p)
					if !strings.Contains(base.Key, "."+lang+".") {
						t.Fatalf("%s: base key %s is not a %s base", ids[lang], base.Key, lang)
					}
					nodes = append(nodes, base)
				}
			}
			got := buildAll(t, ctx, host, nodes)
			for _, n := range nodes {
				wantNetworkFailure(t, got[n.ID()], "load metadata for "+fromImage(t, n.Dockerfile), "registry-1.docker.io")
			}
		})
	}
}

// TestBuildFromGivenImage binds a parent key to an image in the registry
// (Options.Images, build --build-context): the bound node is not built and
// its child builds FROM the image, on both platforms.
func TestBuildFromGivenImage(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	host, reg := st.BuildkitHost, st.Registry
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	salt := time.Now().UTC().Format(time.RFC3339Nano)
	repo := reg + "/swebuild-test/given"

	var parents, children []*graph.Node
	for _, p := range core.AllPlatforms() {
		key := "swebuild-test.given.base." + p.Arch() + ":latest"
		parents = append(parents, &graph.Node{Key: key, Kind: graph.KindBase, Platform: p,
			Dockerfile: []byte("FROM scratch\nCOPY base.txt /\n"), Context: map[string][]byte{"base.txt": []byte(salt + p.Arch())}})
		children = append(children, &graph.Node{Key: "swebuild-test.given.env." + p.Arch() + ":latest", Kind: graph.KindEnv, Platform: p,
			Parents: []string{key}, Dockerfile: []byte("FROM --platform=" + p.Dockerfile() + " " + key + "\nCOPY env.txt /\n"),
			Context: map[string][]byte{"env.txt": []byte(salt)}})
	}
	opts := Options{Builders: []BuilderSpec{{Addr: host}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet", Push: repo}
	rep, err := Build(ctx, parents, opts)
	if err != nil {
		t.Fatalf("building the parents: %v", err)
	}
	opts.Images = map[string]string{}
	for _, res := range rep.Results {
		// Bound without ":latest", as a user may write it.
		opts.Images[strings.TrimSuffix(res.Node.Key, ":latest")] = res.Outcome.Ref
	}
	opts.RunDir = t.TempDir()
	// The parents are passed again: bound, they are not rebuilt.
	rep, err = Build(ctx, append(slices.Clone(parents), children...), opts)
	if rep == nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	_ = rep.WriteSummary(&sb)
	t.Logf("\n%s", sb.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(children) {
		t.Fatalf("%d results, want only the %d children", len(rep.Results), len(children))
	}
	for _, res := range rep.Results {
		var got []string
		for _, f := range imageFiles(t, res.Outcome.Ref) {
			got = append(got, strings.TrimSuffix(f, "/"))
		}
		slices.Sort(got)
		if want := []string{"base.txt", "env.txt"}; !slices.Equal(got, want) {
			t.Errorf("%s: files %v, want %v", res.Node.ID(), got, want)
		}
	}
	recs := rep.Records()
	keys := inputKeys(children, nil)
	for _, rec := range recs {
		if rec.SpecKey == keys[rec.Key+"@"+rec.Platform.String()] {
			t.Errorf("%s: spec key does not depend on the bound image", rec.Key)
		}
	}

	opts.Images = map[string]string{"Not A Key": "x"}
	if _, err := Build(ctx, children, opts); err == nil || !strings.Contains(err.Error(), "not an image reference") {
		t.Errorf("a bad binding: %v", err)
	}
}
