package ci

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
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

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s/amd64-0/results.jsonl",
		`{"instance_id":"a","platform":"linux/amd64","digest":"`+dA+`","verified":true}`+"\n"+
			`{"id":"b","arch":"x86_64","image":"reg/x:latest@`+dB+`","status":"failed"}`+"\n")
	writeFile(t, dir, "s/arm64-0/results.json", `[{"instance_id":"a","arch":"arm64","digest":"`+dC+`","status":"verified"}]`)
	got, err := ReadResults([]string{filepath.Join(dir, "s")})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{InstanceID: "a", Platform: PlatformAMD64, Digest: dA, Verified: true},
		{InstanceID: "b", Platform: PlatformAMD64, Repository: "reg/x", Digest: dB, Error: "status failed"},
		{InstanceID: "a", Platform: PlatformARM64, Digest: dC, Verified: true},
	}
	for i := range got {
		got[i].Source, got[i].verdict = "", false
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	bad := writeFile(t, dir, "bad.jsonl", `{"instance_id":"a","platform":"linux/amd64"}`+"\n"+`{"platform":"linux/amd64"}`+"\n"+`{"instance_id":"c","arch":"s390x"}`+"\n"+`{"instance_id":"d","platform":"linux/amd64","digest":"md5:1"}`+"\n")
	_, err = ReadResults([]string{bad})
	for _, want := range []string{"bad.jsonl:2: instance_id: missing", `bad.jsonl:3: unknown arch "s390x"`, `bad.jsonl:4: digest: "md5:1"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}

// TestReadShardDirectory reads a shard's output as `swebuild build --verify`
// lays it out (shape taken from a real run): a metadata file without the
// instance (not exported: verification failed), the verify summary with a
// gold and a control result, and other JSON artefacts to skip.
func TestReadShardDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "amd64-0/meta/x__x-1.json", `{
  "images": [
    {"instance_id": "", "node": "base", "platform": "linux/amd64", "arch": "x86_64", "digest": "`+dA+`", "ref": "r/c@`+dA+`", "spec_key": "sha256:1", "verified": null}
  ]
}`)
	writeFile(t, dir, "amd64-0/meta/y__y-1.json", `{"images": [
    {"instance_id": "y__y-1", "node": "instance", "platform": "linux/amd64", "digest": "`+dB+`", "ref": "r/c@`+dB+`", "spec_key": "sha256:2", "verified": null}]}`)
	writeFile(t, dir, "amd64-0/runs/x__x-1/verify/summary.json", `{
  "results": [
    {"instance_id": "x__x-1", "platform": "linux/amd64", "mode": "gold", "resolved": false,
     "failure": "infrastructure_error", "error": "grading x__x-1: no log parser for repository"},
    {"instance_id": "x__x-1", "platform": "linux/amd64", "mode": "empty", "resolved": false}
  ]
}`)
	writeFile(t, dir, "amd64-0/runs/y__y-1/verify/summary.json", `{"results": [{"instance_id": "y__y-1", "platform": "linux/amd64", "mode": "gold", "resolved": true}]}`)
	writeFile(t, dir, "amd64-0/runs/x__x-1/other.json", "{\n  \"foo\": 1\n}\n")
	rs, err := ReadResults([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	got := Combine(rs)
	x, y := got[Key{"x__x-1", PlatformAMD64}], got[Key{"y__y-1", PlatformAMD64}]
	if len(got) != 2 || x.OK() || x.Error != "gold infrastructure_error: grading x__x-1: no log parser for repository" {
		t.Errorf("x: %+v (of %d)", x, len(got))
	}
	if !y.OK() || y.Digest != dB || y.SpecKey != "sha256:2" {
		t.Errorf("y: %+v", y)
	}
	// metadata says verified, the gold run says not: not verified.
	both := Combine([]Result{
		{InstanceID: "z", Platform: PlatformAMD64, Digest: dA, Verified: true},
		{InstanceID: "z", Platform: PlatformAMD64, verdict: true, Verified: false},
	})
	if both[Key{"z", PlatformAMD64}].OK() {
		t.Error("a failed verdict was overridden by a verified one")
	}
	// a file named explicitly must parse
	if _, err := ReadResults([]string{filepath.Join(dir, "amd64-0/runs/x__x-1/other.json")}); err == nil {
		t.Error("an explicit non-record file read without error")
	}
}

func TestFindExisting(t *testing.T) {
	ledger := Latest([]Result{
		{InstanceID: "a", Platform: PlatformAMD64, Digest: dA, Verified: true},
		{InstanceID: "a", Platform: PlatformARM64, Digest: dB, Verified: true},
		{InstanceID: "b", Platform: PlatformAMD64, Digest: dC, Verified: true},
		{InstanceID: "b", Platform: PlatformAMD64, Digest: dA, Verified: false, Error: "gold patch did not verify"}, // latest: failed
		{InstanceID: "c", Platform: PlatformAMD64, Repository: "other/repo", Digest: dC, Verified: true},
		{InstanceID: "d", Platform: PlatformAMD64, Digest: dB, Verified: true}, // digest gone from the registry
	})
	chk := NewMapChecker("reg/r@"+dA, "reg/r@"+dB, "other/repo@"+dC)
	want := []Key{{"a", PlatformAMD64}, {"a", PlatformARM64}, {"b", PlatformAMD64}, {"c", PlatformAMD64}, {"e", PlatformAMD64}}
	got, err := FindExisting(context.Background(), ledger, want, "reg/r", chk, 3)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []Key{{"a", PlatformAMD64}, {"a", PlatformARM64}, {"c", PlatformAMD64}}
	if !reflect.DeepEqual(sortedKeys(got), wantKeys) {
		t.Errorf("existing %v, want %v", sortedKeys(got), wantKeys)
	}
	if got[Key{"c", PlatformAMD64}].Repository != "other/repo" {
		t.Errorf("ledger repository not kept: %+v", got[Key{"c", PlatformAMD64}])
	}
	if chk.Calls() != 3 {
		t.Errorf("%d registry lookups, want 3 (only verified ledger entries are checked)", chk.Calls())
	}
	if _, err := FindExisting(context.Background(), ledger, want, "", chk, 1); err == nil {
		t.Error("no repository anywhere: want an error")
	}
}

func TestMerge(t *testing.T) {
	ids := []string{"a__a-1", "b__b-1", "c__c-1", "d__d-1", "e__e-1"}
	existing := map[Key]Result{
		{"a__a-1", PlatformAMD64}: {InstanceID: "a__a-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dA, Verified: true},
		{"a__a-1", PlatformARM64}: {InstanceID: "a__a-1", Platform: PlatformARM64, Repository: "reg/r", Digest: dB, Verified: true},
		{"b__b-1", PlatformARM64}: {InstanceID: "b__b-1", Platform: PlatformARM64, Repository: "reg/r", Digest: dB, Verified: true},
	}
	previous := Latest([]Result{
		{InstanceID: "c__c-1", Platform: PlatformAMD64, Digest: dC, Verified: true},
	})
	skip := func(id, p string) bool { _, ok := existing[Key{id, p}]; return ok }
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
	results := []Result{
		{InstanceID: "b__b-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dA, Verified: true},
		{InstanceID: "c__c-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dA, Verified: false},
		{InstanceID: "c__c-1", Platform: PlatformARM64, Repository: "reg/r", Digest: dB, Verified: true},
		{InstanceID: "d__d-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dA, Verified: true},
		{InstanceID: "d__d-1", Platform: PlatformARM64, Error: "build: exit code 1"},
		{InstanceID: "e__e-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dC, Verified: true},
		// e on arm64 never reported (shard died)
		{InstanceID: "zzz", Platform: PlatformAMD64, Digest: dA, Verified: true, Source: "x.jsonl:9"},
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
	if len(rep.Unexpected) != 1 || !strings.HasPrefix(rep.Unexpected[0], "x.jsonl:9 zzz") {
		t.Errorf("unexpected %v", rep.Unexpected)
	}
	// b's index: the new amd64 build and the arm64 image already in the registry.
	wantIdx := []Result{
		{InstanceID: "b__b-1", Platform: PlatformAMD64, Repository: "reg/r", Digest: dA, Verified: true},
		{InstanceID: "b__b-1", Platform: PlatformARM64, Repository: "reg/r", Digest: dB, Verified: true},
	}
	if got := rep.IndexImages(); !reflect.DeepEqual(got, wantIdx) {
		t.Errorf("index images %+v\nwant %+v", got, wantIdx)
	}
	var errs []string
	for _, r := range rep.LedgerUpdates() {
		if !r.OK() {
			errs = append(errs, r.InstanceID+" "+r.Platform+": "+r.Error)
		}
	}
	wantErrs := []string{
		"c__c-1 linux/amd64: gold patch did not verify",
		"d__d-1 linux/arm64: build: exit code 1",
		"e__e-1 linux/arm64: no result from shard arm64-1",
	}
	if !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("ledger failures %q, want %q", errs, wantErrs)
	}

	// The second run: everything verified is in the ledger and the registry.
	ledger := Latest(append(rep.LedgerUpdates(), existing[Key{"a__a-1", PlatformAMD64}], existing[Key{"a__a-1", PlatformARM64}], existing[Key{"b__b-1", PlatformARM64}]))
	var want []Key
	for _, id := range ids {
		for _, p := range bothPlatforms {
			want = append(want, Key{id, p})
		}
	}
	chk := NewMapChecker("reg/r@"+dA, "reg/r@"+dB, "reg/r@"+dC)
	ex, err := FindExisting(context.Background(), ledger, want, "reg/r", chk, 2)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Skip: func(id, p string) bool { _, ok := ex[Key{id, p}]; return ok }})
	if err != nil {
		t.Fatal(err)
	}
	var rebuilt []string
	for _, j := range m2.Include {
		for _, id := range j.InstanceIDs() {
			rebuilt = append(rebuilt, id+" "+j.Platform)
		}
	}
	wantRebuilt := []string{"c__c-1 linux/amd64", "d__d-1 linux/arm64", "e__e-1 linux/arm64"}
	if !reflect.DeepEqual(rebuilt, wantRebuilt) {
		t.Errorf("second run rebuilds %q, want only the failures %q", rebuilt, wantRebuilt)
	}
}

func TestSummary(t *testing.T) {
	rep := MergeReport{
		Platforms: bothPlatforms,
		Counts:    MergeCounts{Instances: 3, Indexed: 1, Regressed: 1, Failed: 1},
		Shards:    []PlatformCount{{Platform: PlatformAMD64, Wanted: 3, ToBuild: 3, Shards: 1}},
		Outcomes: []Outcome{
			{InstanceID: "a__a-1", Status: StatusIndexed, Images: []Image{{Platform: PlatformAMD64, Source: "built", Digest: dA, Verified: true}}},
			{InstanceID: "b__b-1", Status: StatusFailed, Images: []Image{{Platform: PlatformAMD64, Source: "built", Shard: "amd64-0", Error: "build failed | exit 1\nsee log"}}},
			{InstanceID: "c__c-1", Status: StatusRegressed, Images: []Image{{Platform: PlatformAMD64, Source: "built", Shard: "amd64-0", Error: "gold patch did not verify"}}},
		},
	}
	var buf bytes.Buffer
	opts := SummaryOptions{Sizes: "| image | growth |\n|---|---|\n| x | 30% |\n", SizesFailed: true}
	if err := WriteSummary(&buf, rep, opts); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "## swebuild nightly: FAILED: 1 regression, 1 new failure, size growth over the limit\n") {
		t.Errorf("verdict line wrong:\n%s", out)
	}
	order := []string{"### Regressions", "`c__c-1` | linux/amd64 | amd64-0 | gold patch did not verify", "### Failures", `build failed \| exit 1 see log`, "### Sizes", "| x | 30% |", "### Work per platform", "Indexed (1)", "`a__a-1`"}
	pos := 0
	for _, s := range order {
		i := strings.Index(out[pos:], s)
		if i < 0 {
			t.Fatalf("summary lacks %q after byte %d:\n%s", s, pos, out)
		}
		pos += i + len(s)
	}
	if !opts.RunFailed(rep) {
		t.Error("RunFailed false")
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

// TestPublishFormats reads files written by publish's own writers (the
// builder's metadata file and publish's ledger) and feeds the merge result
// back through publish.ReadMetadata's validation.
func TestPublishFormats(t *testing.T) {
	dir := t.TempDir()
	yes, no := true, false
	md := &publish.Metadata{Images: []publish.Image{
		{InstanceID: "a__a-1", Node: publish.NodeEnv, Platform: PlatformAMD64, Digest: dC, Ref: "reg/cache@" + dC, SpecKey: "env"},
		{InstanceID: "a__a-1", Platform: PlatformAMD64, Digest: dA, Ref: "reg/cache@" + dA, SpecKey: "ka", Verified: &yes},
		{InstanceID: "b__b-1", Platform: PlatformAMD64, Digest: dB, Ref: "reg/cache@" + dB, SpecKey: "kb", Verified: &no},
	}}
	if err := os.MkdirAll(filepath.Join(dir, "shard"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := publish.WriteMetadata(filepath.Join(dir, "shard", "metadata.json"), md); err != nil {
		t.Fatal(err)
	}
	results, err := ReadResults([]string{filepath.Join(dir, "shard")})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].SpecKey != "ka" || results[0].Repository != "reg/cache" || !results[0].Verified || results[1].Verified {
		t.Fatalf("metadata read as %+v", results)
	}

	l, err := publish.OpenLedger(filepath.Join(dir, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []core.Image{
		{Kind: core.KindInstance, InstanceID: "c__c-1", Platform: PlatformARM64, Ref: "reg/r/sweb.eval.arm64.c_1776_c-1@" + dC, Digest: dC, SpecKey: "kc", Verified: &yes, Status: core.StatusPublished},
		{Kind: core.KindIndex, InstanceID: "c__c-1", Ref: "reg/r/sweb.eval.c_1776_c-1@" + dA, Digest: dA, Status: core.StatusPublished},
		{Kind: core.KindBlob, Ref: "reg/r@" + dB, Digest: dB, Status: core.StatusPublished},
		{Kind: core.KindInstance, InstanceID: "d__d-1", Platform: PlatformAMD64, Digest: dB, SpecKey: "kd", Verified: &yes, Status: core.StatusFailed, Error: "push: 500"},
	} {
		if err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ledgerRecs, err := ReadResults([]string{filepath.Join(dir, "ledger.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	ledger := Latest(ledgerRecs)
	if len(ledger) != 2 {
		t.Fatalf("ledger read as %+v", ledger)
	}
	chk := NewMapChecker("reg/r/sweb.eval.arm64.c_1776_c-1@"+dC, "reg/r/sweb.eval.x86_64.d_1776_d-1@"+dB)
	want := []Key{{"c__c-1", PlatformARM64}, {"d__d-1", PlatformAMD64}}
	existing, err := FindExisting(context.Background(), ledger, want, "", chk, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(existing); !reflect.DeepEqual(got, want[:1]) {
		t.Errorf("existing %v, want only c on arm64 (d was never pushed)", got)
	}

	m, err := BuildMatrix([]string{"a__a-1", "b__b-1", "c__c-1"}, MatrixOptions{
		Platforms: bothPlatforms, Shards: 1,
		PlatformsFor: func(id string) []string {
			if id == "c__c-1" {
				return bothPlatforms
			}
			return []string{PlatformAMD64}
		},
		Skip: func(id, p string) bool { _, ok := existing[Key{id, p}]; return ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, Result{InstanceID: "c__c-1", Platform: PlatformAMD64, Digest: dA, Ref: "reg/cache@" + dA, SpecKey: "kc64", Verified: true})
	rep := Merge(NewPlan(m, existing, ledger, "reg/r", bothPlatforms), results)
	out, err := rep.PublishMetadata()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "index.json")
	if err := publish.WriteMetadata(path, out); err != nil {
		t.Fatal(err)
	}
	back, err := publish.ReadMetadata(path)
	if err != nil {
		t.Fatalf("publish refuses the merged metadata: %v", err)
	}
	var got []string
	for _, im := range back.Images {
		got = append(got, im.InstanceID+" "+im.Platform+" "+im.Ref+" "+im.SpecKey)
	}
	wantImgs := []string{
		"a__a-1 linux/amd64 reg/cache@" + dA + " ka",
		"c__c-1 linux/amd64 reg/cache@" + dA + " kc64",
		"c__c-1 linux/arm64 reg/r/sweb.eval.arm64.c_1776_c-1@" + dC + " kc",
	}
	if !reflect.DeepEqual(got, wantImgs) {
		t.Errorf("publish metadata\n%q\nwant\n%q", got, wantImgs)
	}
}
