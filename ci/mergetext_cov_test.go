package ci

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/swebuild/swebuild/core"
)

// mergeReport is a night with one instance of each status: calc-1 indexed
// (both images), calc-2 unchanged, textutil-1 regressed on arm64, and
// textutil-2 failed on amd64, plus one env built inside a shard.
func mergeReport() MergeReport {
	d1 := digest.Digest("sha256:" + strings.Repeat("1", 64))
	d2 := digest.Digest("sha256:" + strings.Repeat("2", 64))
	img := func(p core.Platform, dg digest.Digest, specKey string) Image {
		return Image{Image: core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: p, Digest: dg,
			Ref: "127.0.0.1:5000/sweb.eval." + p.Arch() + ".fixture_1776_calc-1@" + dg.String(), SpecKey: specKey, Status: core.StatusBuilt},
			Source: "built", Shard: p.Arch() + "-1"}
	}
	return MergeReport{
		Platforms: []core.Platform{core.AMD64, core.ARM64},
		Counts:    MergeCounts{Instances: 4, Indexed: 1, Unchanged: 1, Regressed: 1, Failed: 1},
		Outcomes: []Outcome{
			{InstanceID: "fixture__calc-1", Status: StatusIndexed, Images: []Image{img(core.AMD64, d1, "k1"), img(core.ARM64, d2, "k2")}},
			{InstanceID: "fixture__calc-2", Status: StatusUnchanged, Images: []Image{{Image: core.Image{Platform: core.AMD64, Error: "ignored: unchanged"}}}},
			{InstanceID: "fixture__textutil-1", Status: StatusRegressed, Images: []Image{
				{Image: core.Image{Platform: core.AMD64}},
				{Image: core.Image{Platform: core.ARM64, Error: "gold patch: 2 tests failed"}}}},
			{InstanceID: "fixture__textutil-2", Status: StatusFailed, Images: []Image{{Image: core.Image{Platform: core.AMD64, Error: "build: exit 1"}}}},
		},
		BuiltInShards: []string{"env sweb.env.py.x86_64.abc linux/amd64"},
	}
}

func TestMergeReportText(t *testing.T) {
	r := mergeReport()
	var b bytes.Buffer
	r.WriteText(&b)
	want := "4 instances: 1 to index, 1 unchanged, 1 regressed, 1 failed\n" +
		"1 base/env images built inside instance shards (0 when every shard started from the env stage)\n" +
		"  built in a shard: env sweb.env.py.x86_64.abc linux/amd64\n" +
		"REGRESSED fixture__textutil-1 linux/arm64: gold patch: 2 tests failed\n" +
		"FAILED fixture__textutil-2 linux/amd64: build: exit 1\n"
	if b.String() != want {
		t.Errorf("WriteText =\n%s\nwant\n%s", b.String(), want)
	}
	if got, want := r.GitHubOutput(), "indexed=1\nregressed=1\nfailed=1\n"; got != want {
		t.Errorf("GitHubOutput = %q, want %q", got, want)
	}
	if err := r.Err(); err == nil || err.Error() != "1 regressed, 1 failed" {
		t.Errorf("Err = %v", err)
	}
	clean := MergeReport{Counts: MergeCounts{Instances: 2, Indexed: 1, Unchanged: 1}}
	if err := clean.Err(); err != nil {
		t.Errorf("a clean night: Err = %v", err)
	}
	b.Reset()
	clean.WriteText(&b)
	if want := "2 instances: 1 to index, 1 unchanged, 0 regressed, 0 failed\n" +
		"0 base/env images built inside instance shards (0 when every shard started from the env stage)\n"; b.String() != want {
		t.Errorf("clean WriteText = %q, want %q", b.String(), want)
	}
}

// TestWritePublishMetadata: the records of the instances to index are
// written (what publish reads back); an image without a spec key is left
// out and named in the error, the others still written.
func TestWritePublishMetadata(t *testing.T) {
	r := mergeReport()
	path := filepath.Join(t.TempDir(), "publish.jsonl")
	if err := r.WritePublishMetadata(path); err != nil {
		t.Fatal(err)
	}
	recs, err := core.ReadRecords(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("records = %+v, want calc-1's two images", recs)
	}
	for i, p := range []core.Platform{core.AMD64, core.ARM64} {
		want := r.Outcomes[0].Images[i]
		got := recs[i]
		if got.InstanceID != "fixture__calc-1" || got.Platform != p || got.Digest != want.Digest || got.Ref != want.Ref ||
			got.Status != core.StatusBuilt || got.Verified == nil || !*got.Verified {
			t.Errorf("record %d = %+v", i, got)
		}
	}

	r.Outcomes[0].Images[1].SpecKey = ""
	err = r.WritePublishMetadata(path)
	if err == nil || !strings.Contains(err.Error(), "fixture__calc-1 linux/arm64: no spec_key") {
		t.Fatalf("an image without a spec key: err = %v", err)
	}
	if recs, rerr := core.ReadRecords(path, nil); rerr != nil || len(recs) != 1 || recs[0].Platform != core.AMD64 {
		t.Errorf("after the error the file holds %+v (%v), want the amd64 record", recs, rerr)
	}

	if err := r.WritePublishMetadata(filepath.Join(t.TempDir(), "no-such-dir", "p.jsonl")); err == nil {
		t.Error("an unwritable path: no error")
	}
}

// TestMergeReportFile: WriteReport then ReadReport gives the report back;
// a damaged file is an error naming it.
func TestMergeReportFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "merge.json")
	r := mergeReport()
	if err := WriteReport(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Counts != r.Counts || len(got.Outcomes) != 4 || got.Outcomes[2].Images[1].Error != "gold patch: 2 tests failed" ||
		got.Outcomes[0].Images[0].Shard != "x86_64-1" || got.Outcomes[0].Images[1].Digest != r.Outcomes[0].Images[1].Digest {
		t.Errorf("read back %+v", got)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"counts": [1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(bad); err == nil || !strings.Contains(err.Error(), "reading merge report "+bad) {
		t.Errorf("damaged report: err = %v", err)
	}
	if _, err := ReadReport(filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "reading merge report") {
		t.Errorf("missing report: err = %v", err)
	}
	if err := WriteReport(filepath.Join(dir, "no-such-dir", "m.json"), r); err == nil || !strings.Contains(err.Error(), "writing merge report") {
		t.Errorf("unwritable path: err = %v", err)
	}
}

// TestReadReports: the sizes, drift and repair reports fill the summary;
// a missing sizes or drift report fails that check, a missing repair
// report is only said; a report that cannot be read is an error.
func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	sizes := filepath.Join(dir, "sizes.md")
	if err := os.WriteFile(sizes, []byte("# Sizes\n\nno growth\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	drift, repair := filepath.Join(dir, "drift.md"), filepath.Join(dir, "repair.md")
	var o SummaryOptions
	if err := o.ReadReports(sizes, drift, repair); err != nil {
		t.Fatal(err)
	}
	if o.Sizes != "# Sizes\n\nno growth\n" || o.SizesFailed {
		t.Errorf("sizes: %q failed=%v", o.Sizes, o.SizesFailed)
	}
	if o.Drift != "(no drift report: "+drift+" is missing)" || !o.DriftFailed {
		t.Errorf("drift: %q failed=%v", o.Drift, o.DriftFailed)
	}
	if o.Repair != "(no repair report: "+repair+" is missing)" {
		t.Errorf("repair: %q", o.Repair)
	}

	var none SummaryOptions
	if err := none.ReadReports("", "", ""); err != nil || none != (SummaryOptions{}) {
		t.Errorf("no paths: %+v, %v", none, err)
	}
	var o2 SummaryOptions
	if err := o2.ReadReports(dir, "", ""); err == nil || !strings.Contains(err.Error(), "reading sizes report") {
		t.Errorf("a directory as the sizes report: err = %v", err)
	}
}

// TestAppendSummary: the summary goes to the writer, or is appended to
// the step summary file (what an earlier step wrote there stays).
func TestAppendSummary(t *testing.T) {
	r := MergeReport{Counts: MergeCounts{Instances: 1, Indexed: 1}}
	var direct bytes.Buffer
	if err := AppendSummary("", &direct, r, SummaryOptions{Title: "night 7"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(direct.String(), "## night 7: passed\n\n1 instances: 1 indexed, 0 unchanged, 0 regressed, 0 failed.\n") {
		t.Errorf("summary = %q", direct.String())
	}
	path := filepath.Join(t.TempDir(), "step_summary.md")
	if err := os.WriteFile(path, []byte("earlier\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var unused bytes.Buffer
	if err := AppendSummary(path, &unused, r, SummaryOptions{Title: "night 7"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "earlier\n"+direct.String() || unused.Len() != 0 {
		t.Errorf("file = %q (writer got %d bytes), want the earlier line then the summary", b, unused.Len())
	}
	err = AppendSummary(filepath.Join(t.TempDir(), "no-such-dir", "s.md"), &unused, r, SummaryOptions{})
	if err == nil || !strings.Contains(err.Error(), "opening summary output") {
		t.Errorf("unopenable file: err = %v", err)
	}
}

func TestRunErr(t *testing.T) {
	clean := MergeReport{Counts: MergeCounts{Instances: 1, Indexed: 1}}
	for _, tc := range []struct {
		name string
		r    MergeReport
		o    SummaryOptions
		want string
	}{
		{name: "clean", r: clean},
		{name: "sizes", r: clean, o: SummaryOptions{SizesFailed: true}, want: "run failed: 0 regressed, 0 failed, sizes failed: true, drift failed: false"},
		{name: "drift", r: clean, o: SummaryOptions{DriftFailed: true}, want: "run failed: 0 regressed, 0 failed, sizes failed: false, drift failed: true"},
		{name: "regressed", r: mergeReport(), want: "run failed: 1 regressed, 1 failed, sizes failed: false, drift failed: false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.RunErr(tc.r)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
