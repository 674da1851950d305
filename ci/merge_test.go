package ci

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	dC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadIDList(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string
		err           string
	}{
		{"plain", "a\nb\n", []string{"a", "b"}, ""},
		{"comments and blanks", "# header\n\n a \n#x\nb", []string{"a", "b"}, ""},
		{"duplicate", "a\nb\na\n", nil, "ids.txt:3: instance id \"a\" repeats line 1"},
		{"comma", "a,b\n", nil, "ids.txt:1: instance id \"a,b\" contains a space or comma"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "ids.txt", tc.content)
			got, err := ReadIDList(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// rec is an instance record: built and verified when digest is set, with a
// ref in repository reg/r.
func rec(id string, platform core.Platform, dg string, verified bool) core.Image {
	im := core.Image{Kind: core.KindInstance, InstanceID: id, Platform: platform, SpecKey: "k-" + id, Status: core.StatusBuilt}
	if dg != "" {
		im.Digest, im.Ref, im.Verified = digest.Digest(dg), "reg/r@"+dg, core.Bool(verified)
	}
	return im
}

func failed(id string, platform core.Platform, msg string) core.Image {
	return core.Image{Kind: core.KindInstance, InstanceID: id, Platform: platform, Status: core.StatusFailed, Error: msg}
}

// TestReadRecords reads a shard directory the way shards lay it out
// (meta/<id>.jsonl build records, other artefacts beside them) and reports
// every bad line of every file with file, line and field.
func TestReadRecords(t *testing.T) {
	dir := t.TempDir()
	var a, b bytes.Buffer
	base := core.Image{Kind: core.KindBase, Key: "sweb.base.py.x86_64:latest", Platform: core.AMD64, Digest: dA, Ref: "r/c@" + dA, Status: core.StatusBuilt}
	if err := core.Encode(&a, []core.Image{base, rec("x__x-1", core.AMD64, dB, true)}); err != nil {
		t.Fatal(err)
	}
	if err := core.Encode(&b, []core.Image{failed("y__y-1", core.ARM64, "verify: gold patch failed")}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "amd64-0/meta/x__x-1.jsonl", a.String())
	writeFile(t, dir, "arm64-0/meta/y__y-1.jsonl", b.String())
	writeFile(t, dir, "amd64-0/runs/x__x-1/verify/summary.json", `{"results": []}`)
	got, err := ReadRecords([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	latest := Latest(got)
	if len(got) != 3 || len(latest) != 2 {
		t.Fatalf("got %d records, %d instance images: %+v", len(got), len(latest), got)
	}
	if x := latest[Key{"x__x-1", core.AMD64}]; !Usable(x) || Repository(x) != "reg/r" {
		t.Errorf("x: %+v", x)
	}
	if y := latest[Key{"y__y-1", core.ARM64}]; Usable(y) || y.Error != "verify: gold patch failed" {
		t.Errorf("y: %+v", y)
	}

	bad := writeFile(t, dir, "bad.jsonl", `{"kind":"instance","platform":"linux/amd64","status":"built"}`+"\n"+
		`{"kind":"instance","instance_id":"c","platform":"s390x","status":"built"}`+"\n"+
		`{"instance_id":"d","arch":"x86_64"}`+"\n")
	bad2 := writeFile(t, dir, "bad2.jsonl", `{"kind":"instance","instance_id":"e","platform":"linux/amd64","status":"built","digest":"md5:1"}`+"\n")
	_, err = ReadRecords([]string{bad, bad2}, nil)
	for _, want := range []string{"bad.jsonl:1: instance_id: required", `bad.jsonl:2: platform: "s390x"`, `bad.jsonl:3: not a record: json: unknown field "arch"`, `bad2.jsonl:1: digest: "md5:1"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

func TestFindExisting(t *testing.T) {
	other := rec("c", core.AMD64, dC, true)
	other.Ref = "other/repo@" + dC
	ledger := Latest([]core.Image{
		rec("a", core.AMD64, dA, true),
		rec("a", core.ARM64, dB, true),
		rec("b", core.AMD64, dC, true),
		failed("b", core.AMD64, "gold patch did not verify"), // latest: failed
		other,
		rec("d", core.AMD64, dB, true), // digest gone from the registry
	})
	chk := NewMapChecker("reg/r@"+dA, "reg/r@"+dB, "other/repo@"+dC)
	want := []Key{{"a", core.AMD64}, {"a", core.ARM64}, {"b", core.AMD64}, {"c", core.AMD64}, {"e", core.AMD64}}
	got, err := FindExisting(context.Background(), ledger, want, nil, "reg/r", chk, 3)
	if err != nil {
		t.Fatal(err)
	}
	// c's record names another repository: not trusted, not asked.
	wantKeys := []Key{{"a", core.AMD64}, {"a", core.ARM64}}
	if !reflect.DeepEqual(sortedKeys(got), wantKeys) {
		t.Errorf("existing %v, want %v", sortedKeys(got), wantKeys)
	}
	if chk.Calls() != 2 {
		t.Errorf("%d registry lookups, want 2 (only verified ledger records in reg/r are checked)", chk.Calls())
	}
	noRepo := rec("a", core.AMD64, dA, true)
	noRepo.Ref = ""
	noRepo.OCILayout = "oci"
	if _, err := FindExisting(context.Background(), Latest([]core.Image{noRepo}), want, nil, "", chk, 1); err == nil {
		t.Error("no repository anywhere: want an error")
	}
}

// TestFindExistingSpecKeyAndRegistry: the nightly's skip filter reuses an
// image only when the ledger's spec key is the key of the inputs now and its
// record names the registry repository the run publishes to.
func TestFindExistingSpecKeyAndRegistry(t *testing.T) {
	const repo = "ghcr.io/org/swebench"
	mk := func(id, ref, specKey string) core.Image {
		r := rec(id, core.AMD64, dA, true)
		r.Ref, r.SpecKey = ref+"@"+dA, specKey
		return r
	}
	under := repo + "/sweb.eval.x86_64.x"
	for _, tc := range []struct {
		name     string
		rec      core.Image
		specKeys map[Key]string // nil: not compared
		reused   bool
	}{
		{"same key, same repository", mk("x", under, "k1"), map[Key]string{{"x", core.AMD64}: "k1"}, true},
		{"spec key changed", mk("x", under, "k1"), map[Key]string{{"x", core.AMD64}: "k2"}, false},
		{"key unknown now", mk("x", under, "k1"), map[Key]string{}, false},
		{"no record key", mk("x", under, ""), map[Key]string{{"x", core.AMD64}: "k1"}, false},
		{"keys not compared (id list)", mk("x", under, "k1"), nil, true},
		{"the repository itself", mk("x", repo, "k1"), nil, true},
		{"another registry", mk("x", "docker.io/org/swebench/sweb.eval.x86_64.x", "k1"), nil, false},
		{"another prefix on the registry", mk("x", "ghcr.io/org/swebench-old/sweb.eval.x86_64.x", "k1"), nil, false},
		{"a parent of the prefix", mk("x", "ghcr.io/org", "k1"), nil, false},
	} {
		// The registry holds the digest everywhere: only the filter decides.
		chk := NewMapChecker(tc.rec.Ref)
		got, err := FindExisting(context.Background(), Latest([]core.Image{tc.rec}), []Key{{"x", core.AMD64}}, tc.specKeys, repo, chk, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[Key{"x", core.AMD64}]; ok != tc.reused {
			t.Errorf("%s: reused %v, want %v", tc.name, ok, tc.reused)
		}
		if !tc.reused && chk.Calls() != 0 {
			t.Errorf("%s: %d registry lookups for a record that is not trusted", tc.name, chk.Calls())
		}
	}
}

// published is what publish appends to the ledger for the records it
// publishes.
func published(recs []core.Image) []core.Image {
	out := make([]core.Image, len(recs))
	for i, r := range recs {
		r.Status = core.StatusPublished
		out[i] = r
	}
	return out
}

func TestMerge(t *testing.T) {
	ids := []string{"a__a-1", "b__b-1", "c__c-1", "d__d-1", "e__e-1"}
	existing := Latest([]core.Image{
		rec("a__a-1", core.AMD64, dA, true),
		rec("a__a-1", core.ARM64, dB, true),
		rec("b__b-1", core.ARM64, dB, true),
	})
	previous := Latest([]core.Image{rec("c__c-1", core.AMD64, dC, true)})
	skip := func(id string, p core.Platform) bool { _, ok := existing[Key{id, p}]; return ok }
	m, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	plan := NewPlan(m, existing, previous, "reg/r", bothPlatforms)
	dir := t.TempDir()
	if err := WritePlan(filepath.Join(dir, "plan.json"), plan); err != nil {
		t.Fatal(err)
	}
	plan, err = ReadPlan(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	notPushed := rec("e__e-1", core.AMD64, dC, true)
	notPushed.Ref = ""
	// b's amd64 build carries its SBOM artifact (the capture's record).
	withSBOM := rec("b__b-1", core.AMD64, dA, true)
	withSBOM.SBOM, withSBOM.SBOMSize = digest.Digest(dC), 658
	withSBOM.Attestation, withSBOM.AttestationSize = digest.Digest(dB), 838
	withSBOM.Verification, withSBOM.VerificationSize = digest.Digest(dA), 1228 // the gold check's statement
	results := []core.Image{
		withSBOM,
		rec("c__c-1", core.AMD64, dA, false),
		rec("c__c-1", core.ARM64, dB, true),
		rec("d__d-1", core.AMD64, dA, true),
		failed("d__d-1", core.ARM64, "build: exit code 1"),
		notPushed,
		// e on arm64 never reported (shard died)
		rec("zzz", core.AMD64, dA, true),
	}
	rep := Merge(plan, results)
	status := map[string]string{}
	for _, o := range rep.Outcomes {
		status[o.InstanceID] = o.Status
	}
	wantStatus := map[string]string{
		"a__a-1": StatusUnchanged, "b__b-1": StatusIndexed, "c__c-1": StatusRegressed,
		"d__d-1": StatusFailed, "e__e-1": StatusFailed,
	}
	if !reflect.DeepEqual(status, wantStatus) {
		t.Errorf("statuses %v, want %v", status, wantStatus)
	}
	if want := (MergeCounts{Instances: 5, Indexed: 1, Unchanged: 1, Regressed: 1, Failed: 2}); rep.Counts != want {
		t.Errorf("counts %+v, want %+v", rep.Counts, want)
	}
	if !rep.Failed() {
		t.Error("Failed() = false with a regression")
	}
	if len(rep.Unexpected) != 1 || rep.Unexpected[0] != "zzz linux/amd64" {
		t.Errorf("unexpected %v", rep.Unexpected)
	}
	var errs []string
	for _, o := range rep.Outcomes {
		for _, img := range o.Images {
			if img.Error != "" {
				errs = append(errs, o.InstanceID+" "+img.Platform.String()+": "+img.Error)
			}
		}
	}
	wantErrs := []string{
		"c__c-1 linux/amd64: gold patch did not verify",
		"d__d-1 linux/arm64: build: exit code 1",
		"e__e-1 linux/amd64: verified but not pushed",
		"e__e-1 linux/arm64: no result from shard arm64-1",
	}
	if !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("failures %q, want %q", errs, wantErrs)
	}
	// b's index: the new amd64 build and the arm64 image already in the registry.
	pub, err := rep.PublishRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range pub {
		got = append(got, r.InstanceID+" "+r.Platform.String()+" "+r.Ref+" "+r.SBOM.String()+" "+r.Attestation.String()+" "+r.Verification.String())
	}
	// The SBOM artifact, BuildKit's attestation manifest and the gold
	// check's verification statement travel to publish, which carries them
	// to the published per-arch image and the index (what swebuild drift,
	// a provenance check and a consumer of the verification read there).
	if want := []string{"b__b-1 linux/amd64 reg/r@" + dA + " " + dC + " " + dB + " " + dA, "b__b-1 linux/arm64 reg/r@" + dB + "   "}; !reflect.DeepEqual(got, want) {
		t.Errorf("publish records %q, want %q", got, want)
	}

	// The second run: the ledger holds what was there and what publish
	// published (b); everything else is built again.
	ledger := Latest(append(published(pub), existing[Key{"a__a-1", core.AMD64}], existing[Key{"a__a-1", core.ARM64}]))
	var want []Key
	for _, id := range ids {
		for _, p := range bothPlatforms {
			want = append(want, Key{id, p})
		}
	}
	chk := NewMapChecker("reg/r@"+dA, "reg/r@"+dB, "reg/r@"+dC)
	ex, err := FindExisting(context.Background(), ledger, want, nil, "reg/r", chk, 2)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Skip: func(id string, p core.Platform) bool { _, ok := ex[Key{id, p}]; return ok }})
	if err != nil {
		t.Fatal(err)
	}
	var rebuilt []string
	for _, j := range m2.Include {
		for _, id := range j.InstanceIDs() {
			rebuilt = append(rebuilt, id+" "+j.Platform.String())
		}
	}
	sort.Strings(rebuilt)
	wantRebuilt := []string{"c__c-1 linux/amd64", "c__c-1 linux/arm64", "d__d-1 linux/amd64", "d__d-1 linux/arm64", "e__e-1 linux/amd64", "e__e-1 linux/arm64"}
	if !reflect.DeepEqual(rebuilt, wantRebuilt) {
		t.Errorf("second run rebuilds %q, want every instance not indexed %q", rebuilt, wantRebuilt)
	}
}

func TestSummary(t *testing.T) {
	rep := MergeReport{
		Platforms: bothPlatforms,
		Counts:    MergeCounts{Instances: 3, Indexed: 1, Regressed: 1, Failed: 1},
		Shards:    []PlatformCount{{Platform: core.AMD64, Wanted: 3, ToBuild: 3, Shards: 1}},
		Outcomes: []Outcome{
			{InstanceID: "a__a-1", Status: StatusIndexed, Images: []Image{{Source: "built", Image: rec("a__a-1", core.AMD64, dA, true)}}},
			{InstanceID: "b__b-1", Status: StatusFailed, Images: []Image{{Source: "built", Shard: "amd64-0", Image: failed("b__b-1", core.AMD64, "build failed | exit 1\nsee log")}}},
			{InstanceID: "c__c-1", Status: StatusRegressed, Images: []Image{{Source: "built", Shard: "amd64-0", Image: failed("c__c-1", core.AMD64, "gold patch did not verify")}}},
		},
	}
	var buf bytes.Buffer
	opts := SummaryOptions{Sizes: "| image | growth |\n|---|---|\n| x | 30% |\n", SizesFailed: true,
		Drift: "## Environment drift\n\n| package | A | B | images |\n|---|---|---|---|\n| `pypi/fixdep` | 1.0 | 1.1 | 1: env e linux/amd64 |\n", DriftFailed: true,
		Repair: "1 env(s) broke gold patches that passed last night\n\n### fixture/calc 1.0\n"}
	if err := WriteSummary(&buf, rep, opts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "## swebuild nightly: FAILED: 1 regression, 1 new failure, size growth over the limit, environment drift over the limit\n") {
		t.Errorf("verdict line wrong:\n%s", out)
	}
	order := []string{"### Regressions", "`c__c-1` | linux/amd64 | amd64-0 | gold patch did not verify", "### Failures", `build failed \| exit 1 see log`,
		"### Repair\n\n1 env(s) broke gold patches that passed last night\n\n### fixture/calc 1.0\n\n", "### Sizes", "| x | 30% |", "### Environment drift", "**Drift check failed.**", "| `pypi/fixdep` | 1.0 | 1.1 |", "### Work per platform", "Indexed (1)", "`a__a-1`"}
	pos := 0
	for _, s := range order {
		i := strings.Index(out[pos:], s)
		if i < 0 {
			t.Fatalf("summary lacks %q after byte %d:\n%s", s, pos, out)
		}
		pos += i + len(s)
	}
	if n := strings.Count(out, "Environment drift\n"); n != 1 {
		t.Errorf("%d Environment drift headings, want 1 (the drift report's own replaced):\n%s", n, out)
	}
	if !opts.RunFailed(rep) {
		t.Error("RunFailed false")
	}
	if !(SummaryOptions{DriftFailed: true}).RunFailed(MergeReport{}) {
		t.Error("RunFailed false with only drift over the limit")
	}

	buf.Reset()
	ok := MergeReport{Counts: MergeCounts{Instances: 1, Unchanged: 1}, Outcomes: []Outcome{{InstanceID: "a", Status: StatusUnchanged}}}
	if err := WriteSummary(&buf, ok, SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "## swebuild nightly: passed\n") || strings.Contains(buf.String(), "###") {
		t.Errorf("clean run summary:\n%s", buf.String())
	}
	if (SummaryOptions{}).RunFailed(ok) {
		t.Error("RunFailed true on a clean run")
	}
}

// TestLegacyLedger reads a ledger written by publish's own ledger writer in
// its older format (publish.Record lines), as a nightly finds it.
func TestLegacyLedger(t *testing.T) {
	dir := t.TempDir()
	// The lines publish's ledger wrote in that format.
	legacy := `{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"c__c-1","platform":"linux/arm64","ref":"reg/r/sweb.eval.arm64.c_1776_c-1:k-123","digest":"` + dC + `","spec_key":"kc","verified":true,"pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"index","instance_id":"c__c-1","ref":"reg/r/sweb.eval.c_1776_c-1:latest","digest":"` + dA + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"blob","ref":"reg/r","digest":"` + dB + `","pushed":true}
{"time":"2026-01-01T00:00:00Z","kind":"image","instance_id":"d__d-1","platform":"linux/amd64","ref":"reg/r/sweb.eval.x86_64.d_1776_d-1:k-1","digest":"` + dB + `","spec_key":"kd","verified":true,"pushed":false,"error":"push: 500"}
`
	if err := os.WriteFile(filepath.Join(dir, "ledger.jsonl"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadLedger(context.Background(), filepath.Join(dir, "ledger.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ledger := Latest(recs)
	c, d := ledger[Key{"c__c-1", core.ARM64}], ledger[Key{"d__d-1", core.AMD64}]
	if len(ledger) != 2 || !Usable(c) || c.Ref != "reg/r/sweb.eval.arm64.c_1776_c-1@"+dC || Usable(d) || d.Error != "push: 500" {
		t.Fatalf("ledger read as %+v", ledger)
	}
	if recs, err := ReadLedger(context.Background(), filepath.Join(dir, "missing.jsonl"), nil); err != nil || len(recs) != 0 {
		t.Fatalf("a missing ledger is an empty one: %v %v", recs, err)
	}
}

// TestMergeFlaky: an image whose gold resolved in 2 of 3 runs (the build
// exported it, labelled) is indexed, published not verified and flaky,
// counted, and named in the night's summary with its test and rate; an
// image merely unverified still fails.
func TestMergeFlaky(t *testing.T) {
	ids := []string{"a__a-1", "b__b-1"}
	m, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	plan := NewPlan(m, nil, nil, "reg/r", bothPlatforms)
	flaky := rec("a__a-1", core.ARM64, dB, false)
	flaky.Flaky = []core.Flake{{Test: "tests/test_clock.py::test_tick", Failed: 1, Runs: 3}}
	results := []core.Image{
		rec("a__a-1", core.AMD64, dA, true), flaky,
		rec("b__b-1", core.AMD64, dA, true), rec("b__b-1", core.ARM64, dB, false),
	}
	rep := Merge(plan, results)
	if want := (MergeCounts{Instances: 2, Indexed: 1, Failed: 1, Flaky: 1}); rep.Counts != want {
		t.Fatalf("counts %+v, want %+v", rep.Counts, want)
	}
	if o := rep.Outcomes[0]; o.Status != StatusIndexed || !o.Flaky {
		t.Errorf("a__a-1: %s flaky=%v, want indexed and flaky", o.Status, o.Flaky)
	}
	pub, err := rep.PublishRecords()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pub {
		wantFlaky := r.Platform == core.ARM64
		if r.IsVerified() == wantFlaky || r.IsFlaky() != wantFlaky {
			t.Errorf("publish record %s: verified %v flaky %v", r.ID(), r.IsVerified(), r.Flaky)
		}
	}
	var buf bytes.Buffer
	if err := WriteSummary(&buf, rep, SummaryOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"1 indexed (1 of them flaky, labelled)", "### Flaky gold (1 image; published labelled flaky, not verified)", "| `a__a-1` | linux/arm64 | `tests/test_clock.py::test_tick` failed 1/3 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
