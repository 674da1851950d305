package pins

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// flatRef is one reference Dockerfile: upstream's make_v5_dockerfiles.py
// output (flat/<id>.Dockerfile) or a v5 task repo's tasks/<id>/Dockerfile.
type flatRef struct {
	source string // "flat" or "task-repo", as x86_only.csv's source column begins
	id     string
	path   string
	body   []byte
}

// x86Row is one row of upstream-v5/flat/x86_only.csv: an x86-only line of
// one reference Dockerfile, found by the reference's own scan.
type x86Row struct {
	dataset, language, category string
	count                       int
	line                        string
}

type flatKey struct{ source, id string }

func loadFlatRefs(t *testing.T) ([]flatRef, map[flatKey][]x86Row) {
	t.Helper()
	v5 := filepath.Join(spectest.SharedDir(t), "upstream-v5")
	var refs []flatRef
	flats, err := filepath.Glob(filepath.Join(v5, "flat", "*.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range flats {
		refs = append(refs, flatRef{source: "flat", id: strings.TrimSuffix(filepath.Base(p), ".Dockerfile"), path: p})
	}
	tasks, err := filepath.Glob(filepath.Join(v5, "task-repo-multimodal", "tasks", "*", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tasks {
		refs = append(refs, flatRef{source: "task-repo", id: filepath.Base(filepath.Dir(p)), path: p})
	}
	if len(flats) == 0 || len(tasks) == 0 {
		t.Fatalf("no reference Dockerfiles under %s (flat %d, task repo %d)", v5, len(flats), len(tasks))
	}
	for i := range refs {
		if refs[i].body, err = os.ReadFile(refs[i].path); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(v5, "flat", "x86_only.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows := map[flatKey][]x86Row{}
	for _, r := range recs[1:] { // source,instance_id,dataset,language,category,count,line
		src, _, _ := strings.Cut(r[0], "@")
		n, err := strconv.Atoi(r[5])
		if err != nil {
			t.Fatalf("x86_only.csv: count %q: %v", r[5], err)
		}
		k := flatKey{src, r[1]}
		rows[k] = append(rows[k], x86Row{dataset: r[2], language: r[3], category: r[4], count: n, line: r[6]})
	}
	return refs, rows
}

// rowsOf returns the distinct lines of category (the csv repeats a file's
// rows once per dataset the instance is in) with their counts.
func rowsOf(rows []x86Row, category string) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		if r.category == category {
			out[r.line] = r.count
		}
	}
	return out
}

func trimmedSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		m[strings.TrimSpace(l)] = true
	}
	return m
}

// sameOutside reports whether orig without the removed lines and out
// without the added lines are the same sequence: every other line is kept,
// in order (the multiset diff alone would not see lines moved).
func sameOutside(orig, out string, removed, added []string) bool {
	strip := func(text string, drop []string) []string {
		n := map[string]int{}
		for _, l := range drop {
			n[l]++
		}
		var kept []string
		for _, l := range strings.Split(text, "\n") {
			if n[l] > 0 {
				n[l]--
				continue
			}
			kept = append(kept, l)
		}
		return kept
	}
	return strings.Join(strip(orig, removed), "\n") == strings.Join(strip(out, added), "\n")
}

func flatRuleByID(t *testing.T, id string) FlatRule {
	for _, r := range FlatRules() {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no flat rule %s", id)
	return FlatRule{}
}

// TestFlatRulesEachAlone runs each flat rule alone over every reference
// Dockerfile (upstream's flat files and the v5 task repo's) and checks that
// the lines it changed are exactly the x86-only lines the reference's own
// scan (x86_only.csv) lists for that rule's kind, replaced by their arm64
// form, in exactly the files the scan lists.
func TestFlatRulesEachAlone(t *testing.T) {
	refs, rows := loadFlatRefs(t)
	type expect struct {
		// want returns the removed and added lines (multisets) the rule
		// must produce for one file, from the reference's rows.
		want func(ref flatRef, rows []x86Row) (removed, added []string)
	}
	oneLine := func(category, contains, old, new string) func(flatRef, []x86Row) ([]string, []string) {
		return func(ref flatRef, rs []x86Row) (removed, added []string) {
			for l, n := range rowsOf(rs, category) {
				if !strings.Contains(l, contains) {
					continue
				}
				// The csv holds lines with leading blanks stripped; find
				// the file's own lines.
				for _, fl := range strings.Split(string(ref.body), "\n") {
					if strings.TrimSpace(fl) == l {
						for k := 0; k < n; k++ {
							removed = append(removed, fl)
							added = append(added, strings.Replace(fl, old, new, 1))
						}
						break
					}
				}
			}
			return removed, added
		}
	}
	oldMvnd, newMvnd := MvndLines()
	cases := map[string]expect{
		IDFlatPlatform: {func(ref flatRef, rs []x86Row) (removed, added []string) {
			for l, n := range rowsOf(rs, "platform_amd64") {
				for k := 0; k < n; k++ {
					removed = append(removed, l)
					added = append(added, strings.Replace(l, "--platform=linux/amd64", "--platform=linux/arm64", 1))
				}
			}
			return removed, added
		}},
		IDFlatMiniconda: {oneLine("x64_binary", "Miniconda3-", "-Linux-x86_64.sh", "-Linux-aarch64.sh")},
		IDFlatChromeApt: {oneLine("apt_arch_amd64", "[arch=amd64]", "[arch=amd64]", "[arch=arm64]")},
		IDFlatPnpm:      {oneLine("x64_binary", "pnpm-linux-x64", "pnpm-linux-x64", "pnpm-linux-arm64")},
		IDFlatMvnd: {func(ref flatRef, rs []x86Row) (removed, added []string) {
			n := rowsOf(rs, "x64_binary")[strings.TrimSpace(oldMvnd[0])]
			for k := 0; k < n; k++ {
				removed = append(removed, oldMvnd...)
				added = append(added, newMvnd...)
			}
			return removed, added
		}},
	}
	for id, c := range cases {
		t.Run(id, func(t *testing.T) {
			rule := flatRuleByID(t, id)
			changedFiles, wantFiles := 0, 0
			for _, ref := range refs {
				res, err := rewriteFlat(ref.body, []FlatRule{rule})
				if err != nil {
					t.Fatalf("%s %s: %v", ref.source, ref.id, err)
				}
				wantRemoved, wantAdded := c.want(ref, rows[flatKey{ref.source, ref.id}])
				if len(wantRemoved) > 0 {
					wantFiles++
				}
				removed, added := lineDiff(string(ref.body), string(res.Dockerfile))
				sort.Strings(wantRemoved)
				sort.Strings(wantAdded)
				if strings.Join(removed, "\n") != strings.Join(wantRemoved, "\n") || strings.Join(added, "\n") != strings.Join(wantAdded, "\n") {
					t.Errorf("%s %s: removed %q added %q; want removed %q added %q", ref.source, ref.id, removed, added, wantRemoved, wantAdded)
					continue
				}
				if !sameOutside(string(ref.body), string(res.Dockerfile), removed, added) {
					t.Errorf("%s %s: lines other than the rule's changed or moved", ref.source, ref.id)
				}
				if changed := !bytes.Equal(res.Dockerfile, ref.body); changed != (len(res.Applied) == 1) {
					t.Errorf("%s %s: changed=%v but Applied=%v", ref.source, ref.id, changed, res.Applied)
				}
				if len(res.Applied) == 1 {
					changedFiles++
				}
				if res.X86Only != "" {
					t.Errorf("%s %s: X86Only %q from a rewrite rule", ref.source, ref.id, res.X86Only)
				}
			}
			if changedFiles != wantFiles || changedFiles == 0 {
				t.Errorf("changed %d files, the reference lists %d", changedFiles, wantFiles)
			}
			t.Logf("%s: %d of %d reference Dockerfiles changed", id, changedFiles, len(refs))
		})
	}

	// The env-yml rule: its lines are the linux-64 conda pins of the nested
	// environment.yml; the csv names the first one of each file.
	t.Run(IDFlatEnvYML, func(t *testing.T) {
		rule := flatRuleByID(t, IDFlatEnvYML)
		changedFiles, wantFiles := 0, 0
		for _, ref := range refs {
			res, err := rewriteFlat(ref.body, []FlatRule{rule})
			if err != nil {
				t.Fatalf("%s %s: %v", ref.source, ref.id, err)
			}
			first := rowsOf(rows[flatKey{ref.source, ref.id}], "conda_linux64_builds")
			removed, added := lineDiff(string(ref.body), string(res.Dockerfile))
			if len(first) == 0 {
				if len(removed)+len(added) > 0 {
					t.Errorf("%s %s: changed %q -> %q but the reference lists no conda builds", ref.source, ref.id, removed, added)
				}
				continue
			}
			wantFiles++
			if len(res.Applied) == 1 {
				changedFiles++
			}
			if !sameOutside(string(ref.body), string(res.Dockerfile), removed, added) {
				t.Errorf("%s %s: lines other than the rule's changed or moved", ref.source, ref.id)
			}
			rm := map[string]bool{}
			for _, l := range removed {
				rm[l] = true
				// name=version=build, each part without blanks or '='.
				parts := strings.Split(strings.TrimPrefix(l, "  - "), "=")
				if !strings.HasPrefix(l, "  - ") || len(parts) != 3 || strings.ContainsAny(l[4:], " :") {
					t.Errorf("%s %s: removed %q, not a conda name=version=build line", ref.source, ref.id, l)
				}
			}
			for _, l := range added {
				name, version, _ := strings.Cut(strings.TrimPrefix(l, "  - "), "=")
				from := name
				if name == "ld_impl_linux-aarch64" {
					from = "ld_impl_linux-64"
				}
				found := false
				for r := range rm {
					if strings.HasPrefix(r, "  - "+from+"="+version+"=") {
						found = true
					}
				}
				if !found || strings.Count(l, "=") != 1 {
					t.Errorf("%s %s: added %q matches no removed line", ref.source, ref.id, l)
				}
			}
			if len(removed)-len(added) != strings.Count(string(ref.body), "\n  - _libgcc_mutex=") {
				t.Errorf("%s %s: %d lines removed, %d added: only _libgcc_mutex lines may go", ref.source, ref.id, len(removed), len(added))
			}
			for l := range first { // e.g. "- ca-certificates=2024.9.24=h06a4308_0"
				if !rm["  "+l] {
					t.Errorf("%s %s: the reference's line %q was not rewritten", ref.source, ref.id, l)
				}
			}
		}
		if changedFiles != wantFiles || changedFiles == 0 {
			t.Errorf("changed %d files, the reference lists %d", changedFiles, wantFiles)
		}
		t.Logf("%s: %d of %d reference Dockerfiles changed", IDFlatEnvYML, changedFiles, len(refs))
	})

	// The x86-only rules change nothing; Chrome for Testing matches exactly
	// the files the reference lists with a chrome_linux64_zip line.
	t.Run(IDFlatChromeTesting, func(t *testing.T) {
		rule := flatRuleByID(t, IDFlatChromeTesting)
		n, want := 0, 0
		for _, ref := range refs {
			res, err := rewriteFlat(ref.body, []FlatRule{rule})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Dockerfile, ref.body) || len(res.Applied) != 0 {
				t.Errorf("%s %s: an x86-only rule changed the file", ref.source, ref.id)
			}
			listed := len(rowsOf(rows[flatKey{ref.source, ref.id}], "chrome_linux64_zip")) > 0
			if listed {
				want++
			}
			if (res.X86Only != "") != listed {
				t.Errorf("%s %s: X86Only %q, reference lists chrome_linux64_zip: %v", ref.source, ref.id, res.X86Only, listed)
			}
			if res.X86Only != "" {
				n++
			}
		}
		if n != want || n == 0 {
			t.Errorf("%d files x86-only, the reference lists %d", n, want)
		}
	})
}

// TestRewriteFlatArm64Reference applies every rule to every reference
// Dockerfile: the result parses, a second pass changes nothing, and a file
// called arm64-buildable keeps none of the x86-only lines the reference's
// scan lists (apt_repo_amd64_only lines excepted: Google's Chrome apt
// repository serves arm64, see flat-arm64-chrome-apt). It logs the counts
// per dataset and language that docs/pins.md quotes.
func TestRewriteFlatArm64Reference(t *testing.T) {
	refs, rows := loadFlatRefs(t)
	type count struct{ total, arm64 int }
	counts := map[string]*count{}
	var keys []string
	buildable, cft := 0, 0
	for _, ref := range refs {
		res, err := RewriteFlatArm64(ref.body)
		if err != nil {
			t.Fatalf("%s %s: %v", ref.source, ref.id, err)
		}
		if _, err := parser.Parse(bytes.NewReader(res.Dockerfile)); err != nil {
			t.Errorf("%s %s: result does not parse: %v", ref.source, ref.id, err)
		}
		again, err := RewriteFlatArm64(res.Dockerfile)
		if err != nil || len(again.Applied) != 0 || !bytes.Equal(again.Dockerfile, res.Dockerfile) {
			t.Errorf("%s %s: a second pass changed the file (%v, %v)", ref.source, ref.id, again.Applied, err)
		}
		rs := rows[flatKey{ref.source, ref.id}]
		if len(rs) == 0 {
			t.Fatalf("%s %s: not in x86_only.csv", ref.source, ref.id)
		}
		hasCfT := len(rowsOf(rs, "chrome_linux64_zip")) > 0
		if hasCfT {
			cft++
		}
		if (res.X86Only == "") == hasCfT {
			t.Errorf("%s %s: X86Only %q; reference lists a Chrome for Testing linux64 zip: %v", ref.source, ref.id, res.X86Only, hasCfT)
		}
		arm := res.X86Only == ""
		if arm {
			buildable++
			out := trimmedSet(string(res.Dockerfile))
			for _, r := range rs {
				if r.category != "apt_repo_amd64_only" && out[strings.TrimSpace(r.line)] {
					t.Errorf("%s %s: arm64-buildable but still holds %s line %q", ref.source, ref.id, r.category, r.line)
				}
			}
		}
		seen := map[string]bool{}
		for _, r := range rs {
			k := ref.source + " | " + r.dataset + " | " + r.language
			if seen[k] {
				continue
			}
			seen[k] = true
			if counts[k] == nil {
				counts[k] = &count{}
				keys = append(keys, k)
			}
			counts[k].total++
			if arm {
				counts[k].arm64++
			}
		}
	}
	if buildable != len(refs)-cft {
		t.Errorf("%d arm64-buildable, want %d (all but the %d with a Chrome for Testing zip)", buildable, len(refs)-cft, cft)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n| %s | %d | %d |", k, counts[k].total, counts[k].arm64)
	}
	t.Logf("arm64-buildable after the flat rules: %d of %d (source | dataset | language | Dockerfiles | arm64):%s", buildable, len(refs), b.String())
}

func TestRewriteFlatArm64Cases(t *testing.T) {
	cases := []struct {
		name, in, want string
		applied        []string
		x86, err       string
	}{
		{name: "platform", in: "FROM --platform=linux/amd64 ubuntu:jammy\nRUN true\n",
			want: "FROM --platform=linux/arm64 ubuntu:jammy\nRUN true\n", applied: []string{IDFlatPlatform}},
		{name: "no platform, nothing to do", in: "FROM ubuntu:jammy\nRUN echo x86_64 amd64\n", want: "FROM ubuntu:jammy\nRUN echo x86_64 amd64\n"},
		{name: "variable platform", in: "FROM --platform=$BUILDPLATFORM golang\n", want: "FROM --platform=$BUILDPLATFORM golang\n"},
		{name: "other platform", in: "FROM --platform=linux/s390x ubuntu\n", want: "FROM --platform=linux/s390x ubuntu\n",
			x86: IDFlatOtherPlatform + ": line 1 names --platform=linux/s390x"},
		{name: "token outside RUN untouched", in: "FROM ubuntu\nLABEL u=https://github.com/pnpm/pnpm/releases/download/v1/pnpm-linux-x64\n",
			want: "FROM ubuntu\nLABEL u=https://github.com/pnpm/pnpm/releases/download/v1/pnpm-linux-x64\n"},
		{name: "pnpm in a heredoc", in: "FROM ubuntu\nRUN <<EOF\nwget -qO p \"https://github.com/pnpm/pnpm/releases/download/v$V/pnpm-linux-x64\"\nEOF\n",
			want: "FROM ubuntu\nRUN <<EOF\nwget -qO p \"https://github.com/pnpm/pnpm/releases/download/v$V/pnpm-linux-x64\"\nEOF\n" /* replaced below */},
		{name: "chrome for testing 153 left alone", in: "FROM ubuntu\nRUN wget https://storage.googleapis.com/chrome-for-testing-public/153.0.8010.36/linux64/chrome-linux64.zip\n",
			want: "FROM ubuntu\nRUN wget https://storage.googleapis.com/chrome-for-testing-public/153.0.8010.36/linux64/chrome-linux64.zip\n",
			x86:  IDFlatChromeTesting + ": Chrome for Testing linux64 153.0.8010.36 (line 2) has a linux-arm64 build, but no rule rewrites it yet"},
		{name: "mvnd in another form", in: "FROM maven\nRUN curl -o m.zip https://downloads.apache.org/maven/mvnd/1.0.2/maven-mvnd-1.0.2-linux-amd64.zip\n",
			want: "FROM maven\nRUN curl -o m.zip https://downloads.apache.org/maven/mvnd/1.0.2/maven-mvnd-1.0.2-linux-amd64.zip\n",
			x86:  IDFlatMvnd + ": line 2 downloads mvnd for linux-amd64 in a form this rule does not rewrite"},
		{name: "not a Dockerfile", in: "", err: "parsing the Dockerfile"},
		{name: "unknown instruction", in: "FROM ubuntu\nFOO bar\n", err: ""},
	}
	// The heredoc case's want: the asset name replaced on that line only.
	cases[5].want = strings.Replace(cases[5].in, "pnpm-linux-x64", "pnpm-linux-arm64", 1)
	cases[5].applied = []string{IDFlatPnpm}
	cases[len(cases)-1].want = cases[len(cases)-1].in
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := RewriteFlatArm64([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Dockerfile) != c.want {
				t.Errorf("got\n%s\nwant\n%s", res.Dockerfile, c.want)
			}
			if strings.Join(res.Applied, ",") != strings.Join(c.applied, ",") {
				t.Errorf("applied %v, want %v", res.Applied, c.applied)
			}
			if res.X86Only != c.x86 {
				t.Errorf("x86 %q, want %q", res.X86Only, c.x86)
			}
		})
	}
}

// TestFlatRulesDocumented: every rule has every field people read.
func TestFlatRulesDocumented(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range FlatRules() {
		if r.ID == "" || r.Match == "" || r.Change == "" || r.Reason == "" || r.Evidence == "" || r.find == nil {
			t.Errorf("rule %q: a field is empty", r.ID)
		}
		if ids[r.ID] {
			t.Errorf("rule %q twice", r.ID)
		}
		ids[r.ID] = true
	}
}
