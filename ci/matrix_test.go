package ci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

var bothPlatforms = []core.Platform{core.AMD64, core.ARM64}

// x86OnlyFunc is the test's stand-in for builder/spec's platform decision:
// ids in x86 get linux/amd64 only, others both.
func x86OnlyFunc(x86 map[string]bool) PlatformsFunc {
	return func(id string) []core.Platform {
		if x86[id] {
			return []core.Platform{core.AMD64}
		}
		return bothPlatforms
	}
}

func loadReference(t *testing.T) (all []string, x86 map[string]bool, arm64Native []string) {
	t.Helper()
	dir := sharedRef(t)
	var err error
	all, err = ReadIDList(filepath.Join(dir, "SWE-bench_test.instance_ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	x86List, err := ReadIDList(filepath.Join(dir, "USE_X86_PY.txt"))
	if err != nil {
		t.Fatal(err)
	}
	arm64Native, err = ReadIDList(filepath.Join(dir, "SWE-bench_test.arm64-native.instance_ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2294 || len(x86List) != 496 || len(arm64Native) != 1798 {
		t.Fatalf("reference lists have %d ids, %d x86-only, %d arm64-native; want 2294, 496, 1798", len(all), len(x86List), len(arm64Native))
	}
	x86 = map[string]bool{}
	for _, id := range x86List {
		x86[id] = true
	}
	return all, x86, arm64Native
}

// checkMatrix asserts the invariants every matrix must hold.
func checkMatrix(t *testing.T, m Matrix, ids []string, platformsFor PlatformsFunc, skip func(string, core.Platform) bool, platforms []core.Platform, maxJobs int) {
	t.Helper()
	if len(m.Include) > maxJobs {
		t.Errorf("%d jobs, over the limit of %d", len(m.Include), maxJobs)
	}
	names := map[string]bool{}
	seen := map[Key]int{}
	sizes := map[core.Platform][]int{}
	for _, j := range m.Include {
		if names[j.Name] {
			t.Errorf("job name %q used twice", j.Name)
		}
		names[j.Name] = true
		got := SplitIDs(j.IDs)
		if !reflect.DeepEqual(got, j.InstanceIDs()) {
			t.Errorf("job %s: ids string and ids disagree", j.Name)
		}
		if j.Count != len(got) || j.Count == 0 {
			t.Errorf("job %s: count %d, %d ids", j.Name, j.Count, len(got))
		}
		for _, id := range got {
			seen[Key{id, j.Platform}]++
			if !slices.Contains(platformsFor(id), j.Platform) {
				t.Errorf("job %s (%s) holds %s, which does not build for that platform", j.Name, j.Platform, id)
			}
		}
		sizes[j.Platform] = append(sizes[j.Platform], j.Count)
	}
	for p, s := range sizes {
		sort.Ints(s)
		if s[len(s)-1]-s[0] > 1 {
			t.Errorf("%s: shard sizes range from %d to %d", p, s[0], s[len(s)-1])
		}
	}
	for _, id := range ids {
		for _, p := range platforms {
			want := 0
			if slices.Contains(platformsFor(id), p) && (skip == nil || !skip(id, p)) {
				want = 1
			}
			if got := seen[Key{id, p}]; got != want {
				t.Errorf("%s on %s appears in %d jobs, want %d", id, p, got, want)
			}
		}
	}
}

func TestBuildMatrixFullTestSplit(t *testing.T) {
	all, x86, arm64Native := loadReference(t)
	pf := x86OnlyFunc(x86)
	tests := []struct {
		shards     int
		wantShards int // per platform
	}{
		{1, 1}, {2, 2}, {7, 7}, {100, 100}, {128, 128}, {129, 128}, {256, 128}, {1000, 128}, {5000, 128},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("shards=", tc.shards), func(t *testing.T) {
			m, err := BuildMatrix(all, MatrixOptions{Platforms: bothPlatforms, Shards: tc.shards, PlatformsFor: pf})
			if err != nil {
				t.Fatal(err)
			}
			checkMatrix(t, m, all, pf, nil, bothPlatforms, MaxMatrixJobs)
			var arm []string
			for _, j := range m.Include {
				if j.Platform == core.ARM64 {
					arm = append(arm, j.InstanceIDs()...)
				}
			}
			sort.Strings(arm)
			want := append([]string(nil), arm64Native...)
			sort.Strings(want)
			if !reflect.DeepEqual(arm, want) {
				t.Errorf("arm64 jobs hold %d ids, want exactly the %d arm64-native ids", len(arm), len(want))
			}
			for _, c := range m.Counts {
				if c.Shards != tc.wantShards {
					t.Errorf("%s: %d shards, want %d", c.Platform, c.Shards, tc.wantShards)
				}
			}
			b, err := m.EncodeForOutput(0, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxJobOutputBytes {
				t.Errorf("matrix JSON is %d bytes", len(b))
			}
		})
	}
}

func TestBuildMatrixShardCap(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("o__r-%04d", i)
	}
	few := ids[:10]
	pfFew := func(id string) []core.Platform {
		// only the first 10 ids build for arm64
		if id < "o__r-0010" {
			return bothPlatforms
		}
		return []core.Platform{core.AMD64}
	}
	tests := []struct {
		name      string
		ids       []string
		pf        PlatformsFunc
		platforms []core.Platform
		shards    int
		maxJobs   int
		want      map[core.Platform]int // shards per platform
	}{
		{"one platform gets all 256", ids, nil, []core.Platform{core.AMD64}, 300, 0, map[core.Platform]int{core.AMD64: 256}},
		{"two platforms split the cap", ids, nil, bothPlatforms, 300, 0, map[core.Platform]int{core.AMD64: 128, core.ARM64: 128}},
		{"small platform leaves room to the big one", ids, pfFew, bothPlatforms, 300, 0, map[core.Platform]int{core.AMD64: 246, core.ARM64: 10}},
		{"fewer ids than shards", few, nil, bothPlatforms, 50, 0, map[core.Platform]int{core.AMD64: 10, core.ARM64: 10}},
		{"lower max jobs", ids, nil, bothPlatforms, 50, 21, map[core.Platform]int{core.AMD64: 10, core.ARM64: 10}},
		{"exactly at the cap", ids, nil, bothPlatforms, 128, 0, map[core.Platform]int{core.AMD64: 128, core.ARM64: 128}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := BuildMatrix(tc.ids, MatrixOptions{Platforms: tc.platforms, Shards: tc.shards, MaxJobs: tc.maxJobs, PlatformsFor: tc.pf})
			if err != nil {
				t.Fatal(err)
			}
			pf := tc.pf
			if pf == nil {
				pf = func(string) []core.Platform { return tc.platforms }
			}
			maxJobs := tc.maxJobs
			if maxJobs == 0 {
				maxJobs = MaxMatrixJobs
			}
			checkMatrix(t, m, tc.ids, pf, nil, tc.platforms, maxJobs)
			got := map[core.Platform]int{}
			for _, c := range m.Counts {
				got[c.Platform] = c.Shards
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shards per platform %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBuildMatrixSkip(t *testing.T) {
	ids := []string{"a__a-1", "a__a-2", "b__b-1", "b__b-2", "c__c-1"}
	skip := func(id string, p core.Platform) bool {
		return (id == "a__a-1") || (id == "b__b-2" && p == core.ARM64)
	}
	m, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) []core.Platform { return bothPlatforms }
	checkMatrix(t, m, ids, all, skip, bothPlatforms, MaxMatrixJobs)
	want := []PlatformCount{
		{Platform: core.AMD64, Wanted: 5, Skipped: 1, ToBuild: 4, Shards: 2},
		{Platform: core.ARM64, Wanted: 5, Skipped: 2, ToBuild: 3, Shards: 2},
	}
	if !reflect.DeepEqual(m.Counts, want) {
		t.Errorf("counts %+v, want %+v", m.Counts, want)
	}
	// everything skipped: an empty include list, which the workflow guards on.
	m, err = BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Skip: func(string, core.Platform) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if string(b) != `{"include":[]}` {
		t.Errorf("all skipped: %s", b)
	}
}

func TestBuildMatrixJSONShape(t *testing.T) {
	runners := DefaultRunners()
	runners[core.ARM64] = Runner{Label: "ubuntu-24.04", Arch: core.AMD64} // arm64 under QEMU
	m, err := BuildMatrix([]string{"c__c-1", "a__a-1", "b__b-1"}, MatrixOptions{Platforms: bothPlatforms, Shards: 2, Runners: runners})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.EncodeForOutput(0, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"include":[` +
		`{"name":"amd64-0","platform":"linux/amd64","runner":"ubuntu-24.04","qemu":false,"shard":0,"count":2,"ids":"a__a-1,b__b-1"},` +
		`{"name":"amd64-1","platform":"linux/amd64","runner":"ubuntu-24.04","qemu":false,"shard":1,"count":1,"ids":"c__c-1"},` +
		`{"name":"arm64-0","platform":"linux/arm64","runner":"ubuntu-24.04","qemu":true,"shard":0,"count":2,"ids":"a__a-1,b__b-1"},` +
		`{"name":"arm64-1","platform":"linux/arm64","runner":"ubuntu-24.04","qemu":true,"shard":1,"count":1,"ids":"c__c-1"}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestBuildMatrixErrors(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
		opts MatrixOptions
		want string
	}{
		{"zero shards", []string{"a"}, MatrixOptions{Platforms: bothPlatforms}, "shards 0"},
		{"no platforms", []string{"a"}, MatrixOptions{Shards: 1}, "no platforms"},
		{"platform without a runner", []string{"a"}, MatrixOptions{Platforms: []core.Platform{core.ARM64}, Shards: 1, Runners: map[core.Platform]Runner{core.AMD64: {Label: "x", Arch: core.AMD64}}}, `"linux/arm64": no runner`},
		{"duplicate platform", []string{"a"}, MatrixOptions{Platforms: []core.Platform{core.AMD64, core.AMD64}, Shards: 1}, "requested twice"},
		{"duplicate id", []string{"a", "b", "a"}, MatrixOptions{Platforms: bothPlatforms, Shards: 1}, `"a" listed twice`},
		{"max jobs over GitHub's", []string{"a"}, MatrixOptions{Platforms: bothPlatforms, Shards: 1, MaxJobs: 257}, "max jobs 257"},
		{"too many platforms for max jobs", []string{"a"}, MatrixOptions{Platforms: bothPlatforms, Shards: 1, MaxJobs: 1}, "over the limit of 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildMatrix(tc.ids, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSplitBalanced(t *testing.T) {
	for n := 0; n <= 40; n++ {
		list := make([]string, n)
		for i := range list {
			list[i] = fmt.Sprint(i)
		}
		for k := 1; k <= n; k++ {
			chunks := split(list, k)
			if len(chunks) != k {
				t.Fatalf("n=%d k=%d: %d chunks", n, k, len(chunks))
			}
			var joined []string
			lo, hi := n, 0
			for _, c := range chunks {
				joined = append(joined, c...)
				lo, hi = min(lo, len(c)), max(hi, len(c))
			}
			if hi-lo > 1 || lo == 0 {
				t.Errorf("n=%d k=%d: chunk sizes %d..%d", n, k, lo, hi)
			}
			if !reflect.DeepEqual(joined, list) {
				t.Errorf("n=%d k=%d: chunks do not rebuild the list in order", n, k)
			}
		}
	}
}

func TestEncodeForOutputMovesIDsToFiles(t *testing.T) {
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("django__django-%05d", i)
	}
	m, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.EncodeForOutput(2000, ""); err == nil || !strings.Contains(err.Error(), "over the 2000-byte") {
		t.Fatalf("want an error naming the limit, got %v", err)
	}
	dir := t.TempDir()
	b, err := m.EncodeForOutput(2000, dir)
	if err != nil {
		t.Fatal(err)
	}
	var got Matrix
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Include) != 6 {
		t.Fatalf("%d jobs", len(got.Include))
	}
	for i, j := range got.Include {
		if j.IDs != "" || j.IDsFile != j.Name+".txt" {
			t.Errorf("job %s: ids %q ids_file %q", j.Name, j.IDs, j.IDsFile)
		}
		fileIDs, err := ReadIDList(filepath.Join(dir, j.IDsFile))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fileIDs, m.Include[i].InstanceIDs()) {
			t.Errorf("job %s: file holds other ids", j.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "arm64-2.txt")); err != nil {
		t.Error(err)
	}
}

func BenchmarkBuildMatrixFullTestSplit(b *testing.B) {
	ids := make([]string, 2294)
	for i := range ids {
		ids[i] = fmt.Sprintf("repo__repo-%05d", i)
	}
	for b.Loop() {
		if _, err := BuildMatrix(ids, MatrixOptions{Platforms: bothPlatforms, Shards: 128}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBuildMatrixSpecPlatforms runs the full test split through the real
// platform decision (builder/spec, USE_X86 from the embedded v4.1.0 tables).
func TestBuildMatrixSpecPlatforms(t *testing.T) {
	all, x86, _ := loadReference(t)
	tables, err := spec.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, shards := range []int{1, 3, 64, 128, 300} {
		platformsFor := tables.PlatformsByID(nil)
		m, err := BuildMatrix(all, MatrixOptions{Platforms: bothPlatforms, Shards: shards, PlatformsFor: platformsFor})
		if err != nil {
			t.Fatal(err)
		}
		checkMatrix(t, m, all, x86OnlyFunc(x86), nil, bothPlatforms, MaxMatrixJobs)
	}
}
