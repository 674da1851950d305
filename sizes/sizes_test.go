package sizes

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/klauspost/compress/zstd"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
)

func TestParseSet(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.json")
	if err := os.WriteFile(ledger, []byte(`{"images":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		arg      string
		scheme   string
		template string
		file     string
		err      string
	}{
		{arg: "127.0.0.1:5000/swebuild", scheme: SchemeSwebuild, template: "127.0.0.1:5000/swebuild/sweb.eval.{arch}.{id_1776}:latest"},
		{arg: "swebuild:ghcr.io/x/y/", scheme: SchemeSwebuild, template: "ghcr.io/x/y/sweb.eval.{arch}.{id_1776}:latest"},
		{arg: "upstream", scheme: SchemeUpstream, template: "docker.io/swebench/sweb.eval.{arch}.{id_1776}:latest"},
		{arg: "upstream:mirror.local:5000/swebench", scheme: SchemeUpstream, template: "mirror.local:5000/swebench/sweb.eval.{arch}.{id_1776}:latest"},
		{arg: "epoch", scheme: SchemeEpoch, template: "ghcr.io/epoch-research/swe-bench.eval.{arch}.{id}:latest"},
		{arg: "h:1/ns/img.{arch}.{id}:v2", scheme: SchemeTemplate, template: "h:1/ns/img.{arch}.{id}:v2"},
		{arg: "file:" + ledger, scheme: SchemeFile, file: ledger},
		{arg: ledger, scheme: SchemeFile, file: ledger},
		{arg: "", err: "empty image set"},
		{arg: "swebuild", err: "needs a repository"},
		{arg: "epoch:ghcr.io/{id}", err: "not a template"},
		{arg: "nothere.json", err: "file not found"},
		{arg: "h/ns/img.{arch}", err: "needs {id}"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := ParseSet(tc.arg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSet(%q) error = %v, want it to contain %q", tc.arg, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSet(%q): %v", tc.arg, err)
			}
			if got.Scheme != tc.scheme || got.Template != tc.template || got.File != tc.file {
				t.Errorf("ParseSet(%q) = %+v, want scheme %q template %q file %q", tc.arg, got, tc.scheme, tc.template, tc.file)
			}
		})
	}
}

// The expected names come from upstream data: meta.json of the v4.1.0
// reference ("swebench/sweb.eval.x86_64.django_1776_django-11099") and
// Epoch's published naming (ghcr.io/epoch-research/swe-bench.eval.<arch>.<id>).
func TestExpandTemplate(t *testing.T) {
	tests := []struct {
		set, id, platform, want, err string
	}{
		{"upstream", "django__django-11099", "linux/amd64", "docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest", ""},
		{"epoch", "django__django-11133", "linux/arm64", "ghcr.io/epoch-research/swe-bench.eval.arm64.django__django-11133:latest", ""},
		{"reg:5000/swebuild", "Sphinx-Doc__sphinx-8721", "linux/arm64/v8", "reg:5000/swebuild/sweb.eval.arm64.sphinx-doc_1776_sphinx-8721:latest", ""},
		{"r/x.{goarch}.{id}", "a__b-1", "linux/amd64", "r/x.amd64.a__b-1", ""},
		{"upstream", "a__b-1", "linux/s390x", "", "is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.set+" "+tc.id+" "+tc.platform, func(t *testing.T) {
			spec, err := ParseSet(tc.set)
			if err != nil {
				t.Fatal(err)
			}
			// The platform is read at the door (the --platform flag).
			p, err := core.ParsePlatform(tc.platform)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ExpandTemplate(spec.Template, tc.id, p); got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// The reference data records the namespaced instance name upstream v4.1.0
// computes (meta.json); ours (through the manifests package) and the
// upstream scheme must give exactly that name under namespace "swebench".
func TestRefMatchesUpstreamMeta(t *testing.T) {
	root := spectest.SharedDir(t)
	ours, err := ParseSet("swebuild:swebench")
	if err != nil {
		t.Fatal(err)
	}
	up, err := ParseSet("upstream:swebench")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"django__django-11099", "astropy__astropy-12907", "sympy__sympy-20590", "sphinx-doc__sphinx-8721"} {
		for _, arch := range []string{"x86_64", "arm64"} {
			b, err := os.ReadFile(filepath.Join(root, "upstream-v4.1.0", "instances", id, arch, "meta.json"))
			if err != nil {
				t.Fatalf("reading meta.json of %s: %v", id, err)
			}
			platform := map[string]core.Platform{"x86_64": core.AMD64, "arm64": core.ARM64}[arch]
			for _, set := range []SetSpec{ours, up} {
				got, err := set.Ref(id, platform)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte(`"`+got+`"`)) {
					t.Errorf("%s %s (%s): %q not found in upstream meta.json:\n%s", id, arch, set.Scheme, got, b)
				}
			}
		}
	}
}

func TestRepoFromID(t *testing.T) {
	tests := map[string]string{
		"django__django-11099":            "django/django",
		"scikit-learn__scikit-learn-1":    "scikit-learn/scikit-learn",
		"pytest-dev__pytest-5103":         "pytest-dev/pytest",
		"sphinx-doc__sphinx-8721":         "sphinx-doc/sphinx",
		"no-double-underscore-1":          "",
		"owner__name":                     "",
		"__x-1":                           "",
		"pvlib__pvlib-python-1707":        "pvlib/pvlib-python",
		"astropy__astropy-12907":          "astropy/astropy",
		"matplotlib__matplotlib-23314":    "matplotlib/matplotlib",
		"pylint-dev__pylint-7080":         "pylint-dev/pylint",
		"psf__requests-2317":              "psf/requests",
		"pydata__xarray-4094":             "pydata/xarray",
		"sqlfluff__sqlfluff-1625":         "sqlfluff/sqlfluff",
		"marshmallow-code__marshmallow-1": "marshmallow-code/marshmallow",
	}
	for id, want := range tests {
		if got := RepoFromID(id); got != want {
			t.Errorf("RepoFromID(%q) = %q, want %q", id, got, want)
		}
	}
}

// Every id of the real Verified split derives the repo its record names.
func TestRepoFromIDOnVerified(t *testing.T) {
	root := spectest.SharedDir(t)
	path := filepath.Join(root, "datasets", "SWE-bench_Verified", "test.jsonl")
	if _, err := os.Stat(path); err != nil {
		matches, _ := filepath.Glob(filepath.Join(root, "datasets", "SWE-bench_Verified", "*.jsonl"))
		if len(matches) == 0 {
			t.Fatalf("no Verified JSONL under %s", root)
		}
		path = matches[0]
	}
	ins, err := LoadInstances(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 500 {
		t.Fatalf("loaded %d instances, want 500", len(ins))
	}
	for _, in := range ins {
		if got := RepoFromID(in.ID); got != in.Repo {
			t.Errorf("%s: RepoFromID = %q, record says %q", in.ID, got, in.Repo)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"},
		{10 * 1024, "10.0 KiB"}, {1024 * 1024, "1.00 MiB"}, {67 << 30, "67.0 GiB"},
		{684 << 30, "684 GiB"}, {2 << 40, "2.00 TiB"}, {-2048, "-2.00 KiB"},
	}
	for _, tc := range tests {
		if got := HumanBytes(tc.n); got != tc.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct {
		max      int64
		step     float64
		unitName string
	}{
		{0, 1, "B"},
		{900, 200, "B"},
		{5 << 20, 1 << 20, "MiB"},
		{67 << 30, 20 << 30, "GiB"},
		{3 << 30, 1 << 30, "GiB"},
		{1500 << 10, 512 << 10, "MiB"}, // 1.46 MiB: ticks every 0.5 MiB
		{900 << 10, 200 << 10, "KiB"},
	}
	for _, tc := range tests {
		step, _, name := niceStep(tc.max)
		if step != tc.step || name != tc.unitName {
			t.Errorf("niceStep(%d) = %v %s, want %v %s", tc.max, step, name, tc.step, tc.unitName)
		}
	}
}

func TestLoadImageFile(t *testing.T) {
	dir := t.TempDir()
	d1, d2 := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	yes := true

	// A build metadata file written by the record codec.
	md := []core.Image{
		{Kind: core.KindInstance, InstanceID: "b__b-2", Platform: core.ARM64, Digest: digest.Digest(d2), Ref: "h:5000/build/cache@" + d2, SpecKey: "k2", Verified: &yes, Status: core.StatusBuilt},
		{Kind: core.KindInstance, InstanceID: "a__a-1", Platform: core.AMD64, Digest: digest.Digest(d1), Ref: "h:5000/build/cache@" + d1, SpecKey: "k1", Status: core.StatusBuilt},
		{Kind: core.KindEnv, Key: "sweb.env.py.x86_64.e:latest", Platform: core.AMD64, Digest: digest.Digest(d1), Ref: "h:5000/build/cache@" + d1, SpecKey: "e", Status: core.StatusBuilt},
		{Kind: core.KindInstance, InstanceID: "c__c-3", Platform: core.AMD64, Digest: digest.Digest(d1), OCILayout: "oci/c", SpecKey: "k3", Status: core.StatusBuilt},
		{Kind: core.KindInstance, InstanceID: "d__d-4", Platform: core.AMD64, Status: core.StatusFailed, Error: "verify: gold patch failed"},
	}
	mdPath := filepath.Join(dir, "metadata.jsonl")
	if err := core.WriteFile(mdPath, md); err != nil {
		t.Fatal(err)
	}
	// A publish ledger written by publish's own ledger.
	ledgerPath := filepath.Join(dir, "ledger.jsonl")
	l, err := publish.OpenLedger(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	recs := []core.Image{
		{Kind: core.KindBlob, Digest: digest.Digest(d1), Ref: "h/r@" + d1, Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "a__a-1", Platform: core.AMD64, Digest: digest.Digest(d1), Status: core.StatusFailed, Error: "boom"},
		{Kind: core.KindInstance, InstanceID: "a__a-1", Platform: core.AMD64, Ref: "h:5000/ns/sweb.eval.x86_64.a_1776_a-1@" + d1, Digest: digest.Digest(d1), SpecKey: "k1", Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "b__b-2", Platform: core.ARM64, Digest: digest.Digest(d2), Status: core.StatusFailed, Error: "upload failed"},
		{Kind: core.KindIndex, InstanceID: "a__a-1", Ref: "h:5000/ns/sweb.eval.a_1776_a-1@" + d2, Digest: digest.Digest(d2), Status: core.StatusPublished},
	}
	for _, r := range recs {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(dir, "torn.jsonl")
	b, _ := os.ReadFile(ledgerPath)
	if err := os.WriteFile(torn, append(b, []byte(`{"kind":"instance","instance_id":"z`)...), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A ledger in the older format (before publish wrote core records).
	legacy := write("legacy.jsonl", `{"time":"2026-01-01T00:00:00Z","kind":"blob","ref":"h/r","digest":"`+d1+`","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"a__a-1","platform":"linux/amd64","ref":"h:5000/ns/sweb.eval.x86_64.a_1776_a-1:k-123","digest":"`+d1+`","pushed":false,"error":"boom"}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"a__a-1","platform":"linux/amd64","ref":"h:5000/ns/sweb.eval.x86_64.a_1776_a-1:k-123","digest":"`+d1+`","spec_key":"k1","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"b__b-2","platform":"linux/arm64","ref":"h:5000/ns/sweb.eval.arm64.b_1776_b-2:k-9","digest":"`+d2+`","spec_key":"k2","pushed":false,"error":"upload failed"}
{"time":"2026-01-01T00:00:00Z","kind":"index","instance_id":"a__a-1","ref":"h:5000/ns/sweb.eval.a_1776_a-1:k-1","digest":"`+d2+`","pushed":true}
`)
	ledgerWant := func(path string) []string {
		return []string{
			"a__a-1 linux/amd64 ref=h:5000/ns/sweb.eval.x86_64.a_1776_a-1@" + d1,
			"b__b-2 linux/arm64 missing=failed according to " + path + ": upload failed",
		}
	}
	tests := []struct {
		name, path, err string
		want            []string
	}{
		{"metadata", mdPath, "", []string{
			"a__a-1 linux/amd64 ref=h:5000/build/cache@" + d1,
			"b__b-2 linux/arm64 ref=h:5000/build/cache@" + d2,
			"c__c-3 linux/amd64 err=" + mdPath + ": c__c-3 linux/amd64: no ref, not in a registry",
			"d__d-4 linux/amd64 missing=failed according to " + mdPath + ": verify: gold patch failed",
		}},
		{"ledger", ledgerPath, "", ledgerWant(ledgerPath)},
		{"torn ledger", torn, "", ledgerWant(torn)},
		{"older ledger format", legacy, "", ledgerWant(legacy)},
		{"bad metadata", write("badmd.jsonl", "{\"kind\":\"instance\",\"instance_id\": \"a\", \"platform\": \"linux/s390x\", \"status\":\"built\", \"digest\": \""+d1+"\", \"ref\": \"r@"+d1+"\", \"spec_key\": \"k\"}\n"),
			"badmd.jsonl:1: platform", nil},
		{"bad record line", write("bad.jsonl", "{\"kind\":\"instance\",\"status\":\"built\"}\nnot json\n{}\n"), "bad.jsonl:1: instance_id: required", nil},
		{"not a record file", write("other.jsonl", "{\"a\":1}\n{\"b\":2}\n"), "other.jsonl:1: not a record", nil},
		{"bad ledger platform", write("plat.jsonl", "{\"kind\":\"image\",\"instance_id\":\"x\",\"platform\":\"windows/amd64\",\"pushed\":true}\n"), "plat.jsonl:1: platform", nil},
		{"no images", write("none.jsonl", "{\"kind\":\"base\",\"key\":\"b\",\"platform\":\"linux/amd64\",\"status\":\"failed\",\"error\":\"x\"}\n"), "no instance images", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadImageFile(context.Background(), tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, g := range got {
				switch {
				case g.Err != "":
					lines = append(lines, g.Instance+" "+g.Platform.String()+" err="+g.Err)
				case g.Missing != "":
					lines = append(lines, g.Instance+" "+g.Platform.String()+" missing="+g.Missing)
				default:
					lines = append(lines, g.Instance+" "+g.Platform.String()+" ref="+g.Ref)
				}
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestPinRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("c", 64)
	for in, want := range map[string]string{
		"h:5000/r/x:k-1":       "h:5000/r/x@" + d,
		"h:5000/r/x":           "h:5000/r/x@" + d,
		"r/x@sha256:00":        "r/x@" + d,
		"docker.io/a/b:latest": "docker.io/a/b@" + d,
	} {
		if got := pinRef(in, d); got != want {
			t.Errorf("pinRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadInstancesErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		errs          []string
		ids           []string
	}{
		{"ids.txt", "# comment\nz__z-9\n\na__b-1\n", nil, []string{"a__b-1", "z__z-9"}},
		{"badids.txt", "a__b-1\na__b-2 extra\n", []string{"badids.txt:2: instance_id"}, nil},
		{"dup.txt", "a__b-1\na__b-1\n", []string{"duplicate \"a__b-1\""}, nil},
		{"empty.txt", "# nothing\n", []string{"no instances"}, nil},
		// Record files go through the dataset package: its errors name the
		// file and line.
		{"bad.jsonl", "{\"repo\":\"x/y\"}\n", []string{"bad.jsonl:1", "instance_id"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := LoadInstances(context.Background(), p)
			if tc.errs != nil {
				for _, want := range tc.errs {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("error = %v, want it to contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, in := range got {
				ids = append(ids, in.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("ids = %v, want %v", ids, tc.ids)
			}
		})
	}
}

func TestDecompressedSize(t *testing.T) {
	plain := bytes.Repeat([]byte("swebuild layer content "), 5000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	var zs bytes.Buffer
	enc, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(plain)
	enc.Close()
	tests := []struct {
		name string
		data []byte
	}{{"gzip", gz.Bytes()}, {"zstd", zs.Bytes()}, {"plain", plain}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := decompressedSize(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(plain)) {
				t.Errorf("size = %d, want %d", n, len(plain))
			}
		})
	}
	if _, err := decompressedSize(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0})); err == nil {
		t.Error("truncated gzip: no error")
	}
}

// fakeSource serves fixed manifests and blobs and counts requests.
type fakeSource struct {
	mu        sync.Mutex
	manifests map[string]Manifest
	blobs     map[string][]byte
	calls     map[string]int
}

func (f *fakeSource) Manifest(ctx context.Context, ref string, platform core.Platform) (Manifest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["manifest "+ref]++
	m, ok := f.manifests[ref]
	if !ok {
		return Manifest{}, fmt.Errorf("fetching %s: %w", ref, ErrNotFound)
	}
	return m, nil
}

func (f *fakeSource) Blob(ctx context.Context, ref, digest string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["blob "+digest]++
	b, ok := f.blobs[digest]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func blobOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// A hand-made set: the totals are worked out by hand in the comments.
func TestTotalsAndComparison(t *testing.T) {
	src := &fakeSource{blobs: map[string][]byte{}, manifests: map[string]Manifest{}, calls: map[string]int{}}
	layer := func(content string) Blob {
		b := gzipped(t, []byte(content))
		d := blobOf(b)
		src.blobs[d] = b
		return Blob{Digest: d, Size: int64(len(b))}
	}
	config := func(arch string) Blob {
		b := []byte(`{"os":"linux","architecture":"` + arch + `"}`)
		d := blobOf(b)
		src.blobs[d] = b
		return Blob{Digest: d, Size: int64(len(b))}
	}
	base, env := layer(strings.Repeat("b", 3000)), layer(strings.Repeat("e", 2000))
	i1, i2 := layer("instance one"), layer("instance two")
	cfg := config("amd64")
	src.manifests["r/a.x86_64.p_1776_q-1"] = Manifest{Digest: "sha256:m1", Config: cfg, Layers: []Blob{base, env, i1}}
	src.manifests["r/a.x86_64.p_1776_q-2"] = Manifest{Digest: "sha256:m2", Config: cfg, Layers: []Blob{base, env, i2}}
	src.manifests["r/a.x86_64.z_1776_z-1"] = Manifest{Digest: "sha256:m3", Config: config("arm64"), Layers: []Blob{base}}
	src.manifests["r/b.x86_64.p__q-1"] = Manifest{Digest: "sha256:n1", Config: cfg, Layers: []Blob{base, i1}}
	src.manifests["r/b.x86_64.p__q-2"] = Manifest{Digest: "sha256:n2", Config: cfg, Layers: []Blob{base, env, i2}}
	src.manifests["r/b.x86_64.p__q-3"] = Manifest{Digest: "sha256:n3", Config: cfg, Layers: []Blob{env}}

	ids := []Instance{{"p__q-1", "p/q", ""}, {"p__q-2", "p/q", ""}, {"p__q-3", "p/q", ""}, {"z__z-1", "z/z", ""}}
	specA, _ := ParseSet("r/a.{arch}.{id_1776}")
	specB, _ := ParseSet("r/b.{arch}.{id}")
	ctx := context.Background()
	opt := Options{Jobs: 4, Uncompressed: true, CacheDir: t.TempDir()}
	tA, _ := specA.Targets(ids, []core.Platform{core.AMD64}, nil)
	tB, _ := specB.Targets(ids, []core.Platform{core.AMD64}, nil)
	a, err := Measure(ctx, src, specA, tA, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Measure(ctx, src, specB, tB, opt)
	if err != nil {
		t.Fatal(err)
	}
	growth := 10.0
	rep := NewReport(a, b, true, &growth)

	status := func(s *Set) string {
		var out []string
		for _, img := range s.Images {
			out = append(out, img.InstanceID+"="+img.Status)
		}
		return strings.Join(out, " ")
	}
	// A: p__q-3 is missing; z__z-1 has an arm64 config under an amd64 name.
	if got, want := status(a), "p__q-1=ok p__q-2=ok p__q-3=missing z__z-1=error"; got != want {
		t.Errorf("A statuses = %s, want %s", got, want)
	}
	if got, want := status(b), "p__q-1=ok p__q-2=ok p__q-3=ok z__z-1=missing"; got != want {
		t.Errorf("B statuses = %s, want %s", got, want)
	}
	// A measured p__q-1 and p__q-2: naive = 2*base + 2*env + i1 + i2;
	// unique = base + env + i1 + i2; 4 unique layers of 6.
	ta := a.Totals
	naive := 2*base.Size + 2*env.Size + i1.Size + i2.Size
	unique := base.Size + env.Size + i1.Size + i2.Size
	if ta.Measured != 2 || ta.Missing != 1 || ta.Errors != 1 || ta.Layers != 6 || ta.UniqueLayers != 4 ||
		ta.NaiveCompressedBytes != naive || ta.UniqueCompressedBytes != unique {
		t.Errorf("A totals = %+v, want measured 2 missing 1 errors 1 layers 6 unique 4 naive %d unique %d", ta, naive, unique)
	}
	wantU := int64(2*3000 + 2*2000 + len("instance one") + len("instance two"))
	if ta.NaiveUncompressedBytes == nil || *ta.NaiveUncompressedBytes != wantU {
		t.Errorf("A naive uncompressed = %v, want %d", ta.NaiveUncompressedBytes, wantU)
	}
	wantUU := int64(3000 + 2000 + len("instance one") + len("instance two"))
	if ta.UniqueUncompressedBytes == nil || *ta.UniqueUncompressedBytes != wantUU {
		t.Errorf("A unique uncompressed = %v, want %d", ta.UniqueUncompressedBytes, wantUU)
	}
	// Shared layers: p__q-1 and p__q-2 share base and env.
	for _, img := range a.Images[:2] {
		if img.SharedLayers != 2 || img.Layers != 3 {
			t.Errorf("%s: layers %d shared %d, want 3 and 2", img.InstanceID, img.Layers, img.SharedLayers)
		}
	}
	// One config fetch for the two amd64 images with the same config, one
	// for the arm64 config; each manifest once.
	if n := src.calls["blob "+cfg.Digest]; n != 2 {
		t.Errorf("config fetched %d times over both sets, want 2 (once per Measure)", n)
	}
	// Every layer read at most once: the second Measure hit the cache.
	for _, l := range []Blob{base, env, i1, i2} {
		if n := src.calls["blob "+l.Digest]; n != 1 {
			t.Errorf("layer %s read %d times, want 1", l.Digest, n)
		}
	}
	// Comparison over common p__q-1, p__q-2: A unique = base+env+i1+i2,
	// B unique = base+env+i1+i2 too (B's p__q-1 lacks env but p__q-2 has it).
	c := rep.Comparison
	if c.CommonImages != 2 || c.A.UniqueCompressedBytes != unique || c.B.UniqueCompressedBytes != unique {
		t.Errorf("comparison = %+v", c)
	}
	if c.GrowthPercent == nil || *c.GrowthPercent != 0 || rep.GrowthExceeded {
		t.Errorf("growth = %v exceeded %v, want 0 and false", c.GrowthPercent, rep.GrowthExceeded)
	}
	if want := "p/q"; len(c.Repos) != 1 || c.Repos[0].Repo != want {
		t.Errorf("comparison repos = %+v", c.Repos)
	}
	// The arm64-config image is an error, so the command must fail.
	if probs := rep.Problems(); len(probs) != 1 || !strings.Contains(probs[0], "1 image(s) could not be measured") {
		t.Errorf("problems = %q", probs)
	}
	if !strings.Contains(a.Images[3].Error, "image config says platform linux/arm64, want linux/amd64") {
		t.Errorf("z__z-1 error = %q", a.Images[3].Error)
	}
}

func TestGrowthLimit(t *testing.T) {
	mk := func(sizes ...int64) *Set {
		s := &Set{Label: "x"}
		for i, n := range sizes {
			s.Images = append(s.Images, Image{InstanceID: fmt.Sprintf("a__b-%d", i), Repo: "a/b", Platform: core.AMD64, Status: StatusOK,
				CompressedBytes: n, Layers: 1, layers: []Blob{{Digest: fmt.Sprintf("sha256:%d-%d", i, n), Size: n}}})
		}
		s.finish()
		return s
	}
	tests := []struct {
		a, b     []int64
		limit    float64
		growth   float64
		exceeded bool
	}{
		{[]int64{110, 100}, []int64{100, 100}, 5, 5, false},
		{[]int64{110, 100}, []int64{100, 100}, 4.99, 5, true},
		{[]int64{90, 100}, []int64{100, 100}, 0, -5, false},
		{[]int64{300}, []int64{100, 100}, 100, 200, true}, // only a__b-0 is common
	}
	for _, tc := range tests {
		limit := tc.limit
		r := NewReport(mk(tc.a...), mk(tc.b...), false, &limit)
		if r.Comparison.GrowthPercent == nil || *r.Comparison.GrowthPercent != tc.growth || r.GrowthExceeded != tc.exceeded {
			t.Errorf("a=%v b=%v limit %v: growth %v exceeded %v, want %v %v", tc.a, tc.b, tc.limit,
				r.Comparison.GrowthPercent, r.GrowthExceeded, tc.growth, tc.exceeded)
		}
		if got := len(r.Problems()) > 0; got != tc.exceeded {
			t.Errorf("a=%v b=%v: problems %q", tc.a, tc.b, r.Problems())
		}
	}
}

// The first publication of a set has nothing in B to grow from: the growth is
// not measured, --max-growth does not fail, and the Markdown says the limit
// was not checked (the nightly's first run must not fail on it).
func TestGrowthLimitNothingToCompare(t *testing.T) {
	a := &Set{Label: "A"}
	a.Images = append(a.Images, Image{InstanceID: "a__b-1", Repo: "a/b", Platform: core.AMD64, Status: StatusOK,
		CompressedBytes: 100, Layers: 1, layers: []Blob{{Digest: "sha256:1", Size: 100}}})
	a.finish()
	b := &Set{Label: "B"}
	b.Images = append(b.Images, Image{InstanceID: "a__b-1", Repo: "a/b", Platform: core.AMD64, Status: StatusMissing})
	b.finish()
	limit := 10.0
	r := NewReport(a, b, false, &limit)
	if r.Comparison == nil || r.Comparison.GrowthPercent != nil || r.GrowthExceeded {
		t.Fatalf("comparison %+v exceeded %v, want no growth measured and not exceeded", r.Comparison, r.GrowthExceeded)
	}
	if probs := r.Problems(); len(probs) != 0 {
		t.Errorf("problems = %q, want none", probs)
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "not checked against the limit of 10.00%") {
		t.Errorf("markdown does not say the limit was not checked:\n%s", buf.String())
	}
}
