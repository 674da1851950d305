package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/solver/pb"
	digest "github.com/opencontainers/go-digest"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

func TestParseBuilder(t *testing.T) {
	tests := []struct {
		in      string
		want    BuilderSpec
		wantErr string
	}{
		{in: "unix:///run/swebuild/buildkitd.sock", want: BuilderSpec{Addr: "unix:///run/swebuild/buildkitd.sock"}},
		{in: "linux/arm64=tcp://10.0.0.2:1234", want: BuilderSpec{Platform: core.ARM64, Addr: "tcp://10.0.0.2:1234"}},
		{in: "linux/arm64/v8=unix:///a.sock", want: BuilderSpec{Platform: core.ARM64, Addr: "unix:///a.sock"}},
		{in: "linux/amd64=", wantErr: "empty address"},
		{in: "", wantErr: "empty address"},
		{in: "linux/notanarch/x/y=unix:///a", wantErr: "platform"},
	}
	for _, tt := range tests {
		got, err := ParseBuilder(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseBuilder(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseBuilder(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseCacheOption(t *testing.T) {
	tests := []struct {
		in      string
		want    bkclient.CacheOptionsEntry
		wantErr string
	}{
		{in: "type=registry,ref=127.0.0.1:5000/c:x,mode=max", want: bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": "127.0.0.1:5000/c:x", "mode": "max"}}},
		{in: "127.0.0.1:5000/c:x", want: bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": "127.0.0.1:5000/c:x"}}},
		{in: "type=local,src=/tmp/c", want: bkclient.CacheOptionsEntry{Type: "local", Attrs: map[string]string{"src": "/tmp/c"}}},
		{in: "ref=x", wantErr: "type= is required"},
		{in: "type=local,oops", wantErr: `"oops" is not key=value`},
		{in: "", wantErr: "empty"},
	}
	for _, tt := range tests {
		got, err := ParseCacheOption(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCacheOption(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Type != tt.want.Type || len(got.Attrs) != len(tt.want.Attrs) {
			t.Errorf("ParseCacheOption(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		for k, v := range tt.want.Attrs {
			if got.Attrs[k] != v {
				t.Errorf("ParseCacheOption(%q).Attrs[%s] = %q, want %q", tt.in, k, got.Attrs[k], v)
			}
		}
	}
}

func TestContextName(t *testing.T) {
	tests := map[string]string{
		"sweb.base.py.x86_64:latest":            "sweb.base.py.x86_64",
		"sweb.env.py.arm64.0123456789abcdef:v1": "sweb.env.py.arm64.0123456789abcdef:v1",
		"sweb.eval.x86_64.django__django-11099": "sweb.eval.x86_64.django__django-11099",
		"127.0.0.1:5000/x/y:latest":             "127.0.0.1:5000/x/y",
	}
	for in, want := range tests {
		got, err := contextName(in)
		if err != nil || got != want {
			t.Errorf("contextName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := contextName("Not A Ref"); err == nil {
		t.Error("contextName accepted an invalid reference")
	}
}

// contextOps marshals st and returns its local sources (name -> include
// patterns) and the mkfile paths with their data.
func contextOps(t *testing.T, n *graph.Node) (map[string][]string, map[string]string, map[string]fsutil.FS) {
	t.Helper()
	mounts := map[string]fsutil.FS{}
	st, err := contextState(n, mounts)
	if err != nil {
		t.Fatalf("contextState: %v", err)
	}
	def, err := st.Marshal(context.Background())
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	locals := map[string][]string{}
	files := map[string]string{}
	for _, dt := range def.Def {
		var op pb.Op
		if err := op.UnmarshalVT(dt); err != nil {
			t.Fatalf("unmarshal op: %v", err)
		}
		if src := op.GetSource(); src != nil && strings.HasPrefix(src.Identifier, "local://") {
			var inc []string
			if v := src.Attrs[pb.AttrIncludePatterns]; v != "" {
				inc = strings.Split(strings.Trim(v, `[]`), ",")
			}
			locals[strings.TrimPrefix(src.Identifier, "local://")] = inc
		}
		if f := op.GetFile(); f != nil {
			for _, a := range f.Actions {
				if mk := a.GetMkfile(); mk != nil {
					files[mk.Path] = string(mk.Data)
					if mk.Timestamp != 0 {
						t.Errorf("mkfile %s timestamp %d, want 0 (epoch)", mk.Path, mk.Timestamp)
					}
				}
			}
		}
	}
	return locals, files, mounts
}

func TestContextStateHoldsOnlyNamedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"rootfs-amd64.tar", "rootfs-arm64.tar", "unrelated.bin"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := &graph.Node{Key: "base", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch"),
		Context:      map[string][]byte{"setup_env.sh": []byte("echo env\n"), "sub/x.txt": []byte("x")},
		ContextFiles: map[string]string{"rootfs-amd64.tar": filepath.Join(dir, "rootfs-amd64.tar")}}
	locals, files, mounts := contextOps(t, n)

	if want := map[string]string{"/setup_env.sh": "echo env\n", "/sub/x.txt": "x"}; len(files) != len(want) || files["/setup_env.sh"] != want["/setup_env.sh"] || files["/sub/x.txt"] != "x" {
		t.Errorf("mkfile ops %v, want %v", files, want)
	}
	if len(locals) != 1 || len(mounts) != 1 {
		t.Fatalf("locals %v, mounts %d; want one local source and one mount", locals, len(mounts))
	}
	for name, inc := range locals {
		if !slices.Equal(inc, []string{`"rootfs-amd64.tar"`}) {
			t.Errorf("local %s include patterns %v, want only rootfs-amd64.tar", name, inc)
		}
		// What the client would send: walk the filtered FS.
		var sent []string
		err := mounts[name].Walk(context.Background(), "", func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			sent = append(sent, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sent, []string{"rootfs-amd64.tar"}) {
			t.Errorf("filtered FS sends %v, want only rootfs-amd64.tar", sent)
		}
	}
}

func TestContextStateRenamesAndRejectsMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := &graph.Node{Key: "b", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch"),
		ContextFiles: map[string]string{"rootfs.tar": filepath.Join(dir, "a.tar")}}
	locals, _, _ := contextOps(t, n)
	for _, inc := range locals {
		if !slices.Equal(inc, []string{`"a.tar"`}) {
			t.Errorf("include patterns %v, want a.tar", inc)
		}
	}
	n.ContextFiles["missing"] = filepath.Join(dir, "nope.tar")
	if _, err := contextState(n, map[string]fsutil.FS{}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing context file: error %v", err)
	}
}

func TestValidateNode(t *testing.T) {
	ok := func() *graph.Node {
		return &graph.Node{Key: "sweb.env.py.arm64.abc:latest", Kind: graph.KindEnv, Platform: core.ARM64, Dockerfile: []byte("FROM x"), Parents: []string{"sweb.base.py.arm64:latest"}}
	}
	tests := []struct {
		name    string
		mod     func(n *graph.Node)
		wantErr string
	}{
		{"valid", func(n *graph.Node) {}, ""},
		{"x86-only on arm64", func(n *graph.Node) { n.X86Only = true }, "x86-only"},
		{"x86-only on amd64", func(n *graph.Node) { n.X86Only = true; n.Platform = core.AMD64 }, ""},
		{"empty dockerfile", func(n *graph.Node) { n.Dockerfile = nil }, "dockerfile: empty"},
		{"bad parent", func(n *graph.Node) { n.Parents = []string{"UPPER:latest"} }, "parents"},
		{"absolute context name", func(n *graph.Node) { n.Context = map[string][]byte{"/etc/x": nil} }, "clean relative path"},
		{"dotdot context name", func(n *graph.Node) { n.Context = map[string][]byte{"../x": nil} }, "clean relative path"},
		{"relative context path", func(n *graph.Node) { n.ContextFiles = map[string]string{"x": "rel/x"} }, "not absolute"},
		{"duplicate context name", func(n *graph.Node) {
			n.Context = map[string][]byte{"x": nil}
			n.ContextFiles = map[string]string{"x": "/x"}
		}, "also an in-memory"},
	}
	for _, tt := range tests {
		n := ok()
		tt.mod(n)
		err := validateNode(n)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestTrackerCached(t *testing.T) {
	now := time.Now()
	v := func(name string, cached, completed bool) *bkclient.Vertex {
		vx := &bkclient.Vertex{Digest: digest.FromString(name), Name: name, Cached: cached}
		if completed {
			vx.Completed = &now
		}
		return vx
	}
	tests := []struct {
		name string
		vs   []*bkclient.Vertex
		want bool
	}{
		{"all steps cached", []*bkclient.Vertex{v("[1/2] FROM base", true, true), v("[2/2] RUN x", true, true), v("exporting to image", false, true), v("[internal] load build context", false, true)}, true},
		{"one step ran", []*bkclient.Vertex{v("[1/2] FROM base", true, true), v("[2/2] RUN x", false, true)}, false},
		{"named stage step ran", []*bkclient.Vertex{v("[build 3/4] COPY a b", false, true)}, false},
		{"no steps", []*bkclient.Vertex{v("exporting to image", false, true)}, false},
		{"incomplete uncached step ignored", []*bkclient.Vertex{v("[1/1] RUN y", false, false), v("[1/2] RUN z", true, true)}, true},
	}
	for _, tt := range tests {
		tr := newTracker()
		tr.update(&bkclient.SolveStatus{Vertexes: tt.vs})
		if got := tr.cached(); got != tt.want {
			t.Errorf("%s: cached() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRelabelKeepsGraphApart(t *testing.T) {
	a, b := digest.FromString("a"), digest.FromString("b")
	ss := &bkclient.SolveStatus{
		Vertexes: []*bkclient.Vertex{{Digest: b, Inputs: []digest.Digest{a}, Name: "[2/2] RUN x"}},
		Statuses: []*bkclient.VertexStatus{{Vertex: b, ID: "s"}},
		Logs:     []*bkclient.VertexLog{{Vertex: b, Data: []byte("hi")}},
	}
	x, y := relabel("node1", ss), relabel("node2", ss)
	if x.Vertexes[0].Digest == y.Vertexes[0].Digest || x.Vertexes[0].Digest == b {
		t.Error("relabel kept the same vertex digest across nodes")
	}
	if x.Vertexes[0].Name != "[node1] [2/2] RUN x" {
		t.Errorf("name %q", x.Vertexes[0].Name)
	}
	if x.Statuses[0].Vertex != x.Vertexes[0].Digest || x.Logs[0].Vertex != x.Vertexes[0].Digest {
		t.Error("status or log not mapped to the relabelled vertex")
	}
	if x.Vertexes[0].Inputs[0] == a || x.Vertexes[0].Inputs[0] != relabel("node1", &bkclient.SolveStatus{Vertexes: []*bkclient.Vertex{{Digest: a}}}).Vertexes[0].Digest {
		t.Error("inputs not mapped consistently")
	}
	if ss.Vertexes[0].Digest != b || ss.Vertexes[0].Name != "[2/2] RUN x" {
		t.Error("relabel modified its input")
	}
}

// TestReportRecordsReadBack checks the metadata file the builder writes
// against the one record codec every reader uses (core.ReadFile).
func TestReportRecordsReadBack(t *testing.T) {
	dg := "sha256:" + strings.Repeat("ab", 32)
	base := &graph.Node{Key: "sweb.base.py.x86_64:latest", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte("FROM scratch")}
	inst := &graph.Node{Key: "sweb.eval.x86_64.a__b-1:latest", Kind: graph.KindInstance, Platform: core.AMD64, InstanceID: "a__b-1", BaseCommit: "c0ffee",
		Parents: []string{base.Key}, Dockerfile: []byte("FROM sweb.base.py.x86_64:latest")}
	instArm := &graph.Node{Key: "sweb.eval.arm64.a__b-1:latest", Kind: graph.KindInstance, Platform: core.ARM64, InstanceID: "a__b-1", Dockerfile: []byte("FROM x")}
	r := &Report{Results: []Result{
		{Node: inst, Status: StatusDone, Outcome: Outcome{Digest: dg, Ref: "127.0.0.1:5000/b@" + dg, Verified: core.Bool(true),
			Verification: "sha256:" + strings.Repeat("cd", 32), VerificationSize: 1228}},
		{Node: base, Status: StatusDone, Outcome: Outcome{Digest: dg, Ref: "127.0.0.1:5000/b@" + dg}},
		{Node: instArm, Status: StatusFailed, Err: errors.New("boom")},
	}}
	path := filepath.Join(t.TempDir(), "md.jsonl")
	if err := core.WriteFile(path, r.Records()); err != nil {
		t.Fatal(err)
	}
	recs, err := core.ReadFile(path)
	if err != nil {
		t.Fatalf("the codec rejects builder records: %v", err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (one per node, failed ones too)", len(recs))
	}
	b, arm, amd := recs[0], recs[1], recs[2]
	if b.Kind != core.KindBase || b.Key != base.Key || b.Status != core.StatusBuilt || b.Digest.String() != dg {
		t.Errorf("base record %+v", b)
	}
	if arm.Status != core.StatusFailed || !strings.Contains(arm.Error, "boom") || arm.Platform != core.ARM64 || arm.Digest != "" {
		t.Errorf("failed record %+v", arm)
	}
	if amd.InstanceID != "a__b-1" || amd.Platform != core.AMD64 || amd.BaseCommit != "c0ffee" || !amd.IsVerified() || amd.Ref != "127.0.0.1:5000/b@"+dg ||
		amd.Verification.String() != "sha256:"+strings.Repeat("cd", 32) || amd.VerificationSize != 1228 {
		t.Errorf("instance record %+v", amd)
	}
	if b.SpecKey == amd.SpecKey || !strings.HasPrefix(amd.SpecKey, "sha256:") {
		t.Errorf("spec keys %q %q: want distinct derived keys", b.SpecKey, amd.SpecKey)
	}
	// SpecKeys (what the nightly compares with the ledger) are the keys
	// the records carry.
	keys := SpecKeys([]*graph.Node{inst, base, instArm})
	if keys[inst.ID()] != amd.SpecKey || keys[base.ID()] != b.SpecKey || keys[instArm.ID()] != arm.SpecKey {
		t.Errorf("SpecKeys %v, records %q %q %q", keys, amd.SpecKey, b.SpecKey, arm.SpecKey)
	}
	var sb strings.Builder
	if err := r.WriteSummary(&sb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(sb.String(), "\n")
	var order []string
	for _, l := range lines[1:4] {
		order = append(order, strings.Fields(l)[0])
	}
	if order[0] != base.Key || order[1] != instArm.Key || order[2] != inst.Key {
		t.Errorf("summary order %v", order)
	}
	if !strings.Contains(sb.String(), "boom") || !strings.Contains(sb.String(), "3 nodes: 2 built") {
		t.Errorf("summary:\n%s", sb.String())
	}
}

func TestInputKeysFollowParents(t *testing.T) {
	mk := func(df string) []*graph.Node {
		return []*graph.Node{
			{Key: "base", Kind: graph.KindBase, Platform: core.AMD64, Dockerfile: []byte(df)},
			{Key: "env", Kind: graph.KindEnv, Platform: core.AMD64, Parents: []string{"base"}, Dockerfile: []byte("FROM base"), Context: map[string][]byte{"s.sh": []byte("x")}},
		}
	}
	k1, k2 := inputKeys(mk("FROM scratch"), nil), inputKeys(mk("FROM scratch\nENV A=1"), nil)
	if k1["env@linux/amd64"] == k2["env@linux/amd64"] {
		t.Error("changing the parent's Dockerfile did not change the child's key")
	}
	if k1["env@linux/amd64"] != inputKeys(mk("FROM scratch"), nil)["env@linux/amd64"] {
		t.Error("input keys are not deterministic")
	}
}

func TestCachePerNode(t *testing.T) {
	base := &graph.Node{Key: "base", Kind: graph.KindBase, Platform: core.AMD64}
	inst := &graph.Node{Key: "env", Kind: graph.KindEnv, Platform: core.AMD64}
	reg := bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": "127.0.0.1:5000/cache:main", "mode": "max"}}
	bare := bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": "127.0.0.1:5000/cache"}}
	local := bkclient.CacheOptionsEntry{Type: "local", Attrs: map[string]string{"dest": "/c"}}

	ex := cacheExports([]bkclient.CacheOptionsEntry{reg, local}, inst, Job{Node: inst})
	if got, want := ex[0].Attrs["ref"], "127.0.0.1:5000/cache:main-"+cacheTag(inst); got != want || ex[0].Attrs["mode"] != "max" {
		t.Errorf("export ref %q, want %q (mode kept)", got, want)
	}
	if ex[1].Attrs["dest"] != "/c" || reg.Attrs["ref"] != "127.0.0.1:5000/cache:main" {
		t.Error("local entry changed or input modified")
	}
	im := cacheImports([]bkclient.CacheOptionsEntry{bare}, []*graph.Node{base, inst}, "")
	if len(im) != 2 || im[0].Attrs["ref"] != "127.0.0.1:5000/cache:"+cacheTag(base) || im[1].Attrs["ref"] != "127.0.0.1:5000/cache:"+cacheTag(inst) {
		t.Errorf("imports %+v", im)
	}
	if cacheTag(base) == cacheTag(inst) {
		t.Error("two nodes share a cache tag")
	}
}

func TestContextStateDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"mirror/calc.git/HEAD", "mirror/calc.git/objects/ab", "other/x"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Through a symlink, as a user's --context-dir may hold one: the
	// directory is sent, not the link.
	link := filepath.Join(t.TempDir(), "mirror")
	if err := os.Symlink(filepath.Join(dir, "mirror"), link); err != nil {
		t.Fatal(err)
	}
	n := &graph.Node{Key: "inst", Kind: graph.KindInstance, Platform: core.AMD64, Dockerfile: []byte("FROM x"),
		ContextFiles: map[string]string{"mirror": link}}
	_, _, mounts := contextOps(t, n)
	if len(mounts) != 1 {
		t.Fatalf("%d mounts", len(mounts))
	}
	for _, fs := range mounts {
		var sent []string
		if err := fs.Walk(context.Background(), "", func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				sent = append(sent, p)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"mirror/calc.git/HEAD", "mirror/calc.git/objects/ab"}; !slices.Equal(sent, want) {
			t.Errorf("sent %v, want %v", sent, want)
		}
	}
}

func TestWithoutGiven(t *testing.T) {
	mk := func(key string, kind graph.Kind, p core.Platform, parents ...string) *graph.Node {
		return &graph.Node{Key: key, Kind: kind, Platform: p, Parents: parents}
	}
	nodes := []*graph.Node{
		mk("base", graph.KindBase, core.AMD64), mk("base", graph.KindBase, core.ARM64),
		mk("env.a", graph.KindEnv, core.AMD64, "base"), mk("env.a", graph.KindEnv, core.ARM64, "base"),
		mk("env.b", graph.KindEnv, core.AMD64, "base"),
		mk("inst.a", graph.KindInstance, core.AMD64, "env.a"), mk("inst.a", graph.KindInstance, core.ARM64, "env.a"),
		mk("inst.b", graph.KindInstance, core.AMD64, "env.b"),
		mk("lonely", graph.KindBase, core.AMD64),
	}
	ids := func(ns []*graph.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.ID())
		}
		return out
	}
	tests := []struct {
		given map[string]string
		want  []string
	}{
		// A bound base: only it goes.
		{map[string]string{"base": "r/b:1"}, []string{"env.a@linux/amd64", "env.a@linux/arm64", "env.b@linux/amd64", "inst.a@linux/amd64", "inst.a@linux/arm64", "inst.b@linux/amd64", "lonely@linux/amd64"}},
		// A bound env: the base stays for the other env (amd64) and
		// goes where nothing else needs it (arm64).
		{map[string]string{"env.a:latest": "r/e:1"}, []string{"base@linux/amd64", "env.b@linux/amd64", "inst.a@linux/amd64", "inst.a@linux/arm64", "inst.b@linux/amd64", "lonely@linux/amd64"}},
		// Both envs bound: no base is needed; a node with no children
		// to begin with stays.
		{map[string]string{"env.a": "r/e:1", "env.b": "r/e:2"}, []string{"inst.a@linux/amd64", "inst.a@linux/arm64", "inst.b@linux/amd64", "lonely@linux/amd64"}},
	}
	for _, tt := range tests {
		given, err := givenImages(tt.given)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(withoutGiven(nodes, given)); !slices.Equal(got, tt.want) {
			t.Errorf("given %v:\n got %v\nwant %v", tt.given, got, tt.want)
		}
	}
}

// TestSummaryListsWhatWasNotDone: the build summary ends with the instances
// it did not make, by reason: x86-only on linux/arm64 (with the deciding
// rule), not planned, failed, skipped because a parent failed.
func TestSummaryListsWhatWasNotDone(t *testing.T) {
	mk := func(id string, p core.Platform) *graph.Node {
		return &graph.Node{Key: "sweb.eval." + p.Arch() + "." + id + ":latest", Kind: graph.KindInstance, Platform: p, InstanceID: id}
	}
	env := &graph.Node{Key: "sweb.env.py.arm64.x:latest", Kind: graph.KindEnv, Platform: core.ARM64}
	r := &Report{
		Results: []Result{
			{Node: mk("ok__ok-1", core.AMD64), Status: StatusDone},
			{Node: mk("ok__ok-1", core.ARM64), Status: StatusDone},
			{Node: env, Status: StatusFailed, Err: errors.New("conda: exit 1")},
			{Node: mk("dep__dep-1", core.ARM64), Status: StatusSkipped, Err: errors.New("dependency sweb.env.py.arm64.x:latest@linux/arm64 failed")},
			{Node: mk("dep__dep-2", core.ARM64), Status: StatusSkipped, Err: errors.New("dependency failed")},
			{Node: mk("bad__bad-1", core.AMD64), Status: StatusFailed, Err: errors.New("gold patch did not verify")},
		},
		NotPlanned: []NotPlanned{
			{InstanceID: "x86__x86-2", Platform: core.ARM64, Reason: "x86-only (USE_X86)"},
			{InstanceID: "x86__x86-1", Platform: core.ARM64, Reason: "x86-only (USE_X86)"},
			{InstanceID: "p5__p5-1", Platform: core.ARM64, Reason: "x86-only (puppeteer-bundled-chromium)"},
			{InstanceID: "odd__odd-1", Platform: core.AMD64, Reason: "could not be planned"},
		},
	}
	var sb strings.Builder
	if err := r.WriteSummary(&sb); err != nil {
		t.Fatal(err)
	}
	want := `instances not done:
  not built for linux/arm64, x86-only (USE_X86): 2: x86__x86-1 x86__x86-2
  not built for linux/arm64, x86-only (puppeteer-bundled-chromium): 1: p5__p5-1
  not built for linux/amd64, could not be planned: 1: odd__odd-1
  skipped on linux/arm64 (a parent image failed): 2: dep__dep-1 dep__dep-2
  failed on linux/amd64: 1: bad__bad-1
`
	if !strings.HasSuffix(sb.String(), want) {
		t.Errorf("summary:\n%s\nwant it to end with:\n%s", sb.String(), want)
	}
	// A run that made everything says nothing more.
	sb.Reset()
	(&Report{Results: r.Results[:2]}).WriteSummary(&sb)
	if strings.Contains(sb.String(), "not done") {
		t.Errorf("summary of a complete run:\n%s", sb.String())
	}
}
