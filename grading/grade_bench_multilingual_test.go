package grading

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// BenchmarkGradeMultilingualLogs grades every log of the multilingual
// reference (51 logs, 25 parser functions) in-process, reading excluded;
// one op = all of them.
func BenchmarkGradeMultilingualLogs(b *testing.B) {
	logs := readMultilingualLogs(b)
	size := 0
	for _, l := range logs {
		size += len(l.log)
	}
	b.SetBytes(int64(size))
	b.ReportMetric(float64(len(logs)), "logs/op")
	patch := ""
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		for _, l := range logs {
			inst := core.Instance{InstanceID: l.ref.InstanceID, Repo: *l.ref.Repo, FailToPass: l.ref.FailToPass, PassToPass: l.ref.PassToPass}
			r, err := Grade(inst, l.log, &patch, GradeOptions{Rules: RulesV41})
			if err != nil {
				b.Fatal(err)
			}
			_ = r.JSON()
		}
	}
	cpu.report(b)
}

// BenchmarkGradeHugeLog reads (ReadLog, from a file) and grades a 200 MB
// log, what `swebuild grade` does past loading the dataset, on two logs:
// real-repeated is the largest reference log (pydata__xarray-3364, 2.5 MB
// of pytest output, pre-marker) repeated between the markers, so the text
// is real and the status map stays small; distinct-tests is a synthetic
// pytest log of 2.7 million distinct test names, the worst case for the
// map. Run with -benchtime 1x.
func BenchmarkGradeHugeLog(b *testing.B) {
	const size = 200_000_000
	var big gradeJob
	for _, j := range referenceJobs(b, spectest.SharedDir(b)) {
		if len(j.log) > len(big.log) {
			big = j
		}
	}
	if strings.Contains(big.log, StartTestOutput) {
		b.Fatalf("%s has markers: repeating it would grade only its first section", big.inst.InstanceID)
	}
	distinct := core.Instance{InstanceID: "pytest-dev__pytest-5262", Repo: "pytest-dev/pytest",
		FailToPass: []string{"tests/test_basic.py::test_options_work_7"},
		PassToPass: []string{"testing/test_capture.py::TestCaptureManager::test_capturing_basic_api_7[no]"}}
	for _, c := range []struct {
		name  string
		inst  core.Instance
		write func(w *strings.Builder, i int)
		check func(r Report) bool
	}{
		{"real-repeated", big.inst,
			func(w *strings.Builder, _ int) { w.WriteString(big.log) },
			func(r Report) bool { return r.PatchSuccessfullyApplied && r.TestsStatus != nil }},
		{"distinct-tests", distinct,
			func(w *strings.Builder, i int) {
				w.WriteString("PASSED testing/test_capture.py::TestCaptureManager::test_capturing_basic_api_" + itoa(i) + "[no]\n" +
					"FAILED tests/test_basic.py::test_options_work_" + itoa(i) + " - DeprecationWarning: 'werkzeug...\n" +
					"INFO     root:test_global_capture_with_live_logging.py:17 something in test\n")
			},
			func(r Report) bool { return !r.Resolved && len(r.TestsStatus.PassToPass.Success) == 1 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "test_output.txt")
			n := writeHugeLog(b, path, size, c.write)
			patch := ""
			b.SetBytes(int64(n))
			b.ResetTimer()
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				log, err := ReadLog(context.Background(), path, 0)
				if err != nil {
					b.Fatal(err)
				}
				r, err := Grade(c.inst, log, &patch, GradeOptions{Rules: RulesV41})
				if err != nil {
					b.Fatal(err)
				}
				if r.TestsStatus == nil || !c.check(r) {
					b.Fatalf("unexpected report %s", r.JSON())
				}
			}
			cpu.report(b)
		})
	}
}

// writeHugeLog writes to path the markers around what write(w, 0),
// write(w, 1), ... produce until there are at least size bytes, 1 MB at a
// time, and returns the file's length.
func writeHugeLog(b *testing.B, path string, size int, write func(w *strings.Builder, i int)) int {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString(StartTestOutput + "\n")
	n := 0
	for i := 0; n+sb.Len() < size; i++ {
		write(&sb, i)
		if sb.Len() > 1<<20 {
			n += sb.Len()
			if _, err := f.WriteString(sb.String()); err != nil {
				b.Fatal(err)
			}
			sb.Reset()
		}
	}
	sb.WriteString("\n" + EndTestOutput + "\n")
	n += sb.Len()
	if _, err := f.WriteString(sb.String()); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkParseMultilingual parses 1 MB and 10 MB logs made of the marked
// sections of each non-Python parser's real reference logs, repeated (equal
// MB/s at both sizes means linear time), plus adversarial p5.js input (many
// XML blocks, many unclosed tags, numbered lines with no ":" for 1000
// characters).
func BenchmarkParseMultilingual(b *testing.B) {
	type source struct{ parser, id, text, label string }
	var sources []source
	seen := map[string]int{}
	for _, l := range readMultilingualLogs(b) {
		sec := l.log[strings.Index(l.log, StartTestOutput):]
		if i := strings.Index(sec, EndTestOutput); i >= 0 {
			sec = sec[:i]
		}
		name := l.ref.Parser
		if l.ref.DispatchesTo != nil {
			name = *l.ref.DispatchesTo
		}
		if k, ok := seen[name]; ok {
			sources[k].text += sec
			continue
		}
		seen[name] = len(sources)
		sources = append(sources, source{l.ref.Parser, l.ref.InstanceID, sec, ""})
	}
	sources = append(sources,
		source{"parse_log_p5js", "", "<div>\n  1) a\n     b:\n</div>\n<span>x</span> <p>", "xml-blocks"},
		source{"parse_log_p5js", "", "  1) " + strings.Repeat("x", 990) + "\n", "no-colon"},
	)
	for _, s := range sources {
		name := strings.TrimPrefix(s.parser, "parse_log_")
		if strings.Contains(s.parser, "jekyll") || strings.Contains(s.parser, "immutable") {
			name += "-" + s.id[strings.LastIndexByte(s.id, '-')+1:]
		}
		if s.label != "" {
			name += "-" + s.label
		}
		for _, n := range []int{1 << 20, 10 << 20} {
			b.Run(name+"/"+itoa(n>>20)+"MB", func(b *testing.B) {
				log := strings.Repeat(s.text, n/len(s.text)+1)[:n]
				b.SetBytes(int64(len(log)))
				b.ResetTimer()
				cpu := startCPU()
				for i := 0; i < b.N; i++ {
					if _, err := ParseLogWith(s.parser, s.id, log); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
		}
	}
}
