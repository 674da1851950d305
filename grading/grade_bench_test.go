package grading

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

// gradeJob is one reference pair prepared for grading in a benchmark.
type gradeJob struct {
	inst  core.Instance
	log   string
	whole bool
}

// referenceJobs loads every gradable pair of eval-logs/INDEX.csv with the
// labels of its stored report (the benchmark measures speed; correctness is
// TestReferencePairs' job).
func referenceJobs(b *testing.B, shared string) []gradeJob {
	b.Helper()
	var jobs []gradeJob
	for _, row := range readIndex(b, shared) {
		if _, ok := ParserName(row["repo"]); !ok {
			continue
		}
		dir := filepath.Join(shared, "eval-logs", row["dir"])
		raw, err := os.ReadFile(filepath.Join(dir, "test_output.txt"))
		if err != nil {
			b.Fatal(err)
		}
		rep, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			b.Fatal(err)
		}
		var stored map[string]storedEntry
		if err := json.Unmarshal(rep, &stored); err != nil {
			b.Fatal(err)
		}
		inst := core.Instance{InstanceID: row["instance_id"], Repo: row["repo"]}
		if ts := stored[row["instance_id"]].TestsStatus; ts != nil {
			inst.FailToPass = append(append([]string{}, ts.FailToPass.Success...), ts.FailToPass.Failure...)
			inst.PassToPass = append(append([]string{}, ts.PassToPass.Success...), ts.PassToPass.Failure...)
		}
		log := string(raw)
		jobs = append(jobs, gradeJob{inst: inst, log: log, whole: !strings.Contains(log, StartTestOutput)})
	}
	return jobs
}

// BenchmarkGradeMarkerEraLogs grades every marker-era log of the reference
// set in-process (reading excluded), one op = all of them. Target: <= 40 ms.
func BenchmarkGradeMarkerEraLogs(b *testing.B) {
	var jobs []gradeJob
	size := 0
	for _, j := range referenceJobs(b, spectest.SharedDir(b)) {
		if !j.whole {
			jobs = append(jobs, j)
			size += len(j.log)
		}
	}
	b.SetBytes(int64(size))
	b.ReportMetric(float64(len(jobs)), "logs/op")
	patch := ""
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		for _, j := range jobs {
			r, err := Grade(j.inst, j.log, &patch, GradeOptions{Rules: RulesV41})
			if err != nil {
				b.Fatal(err)
			}
			_ = r.JSON()
		}
	}
	cpu.report(b)
}

// BenchmarkGradeAllLogs is the same over every gradable pair, pre-marker
// logs graded with --whole-log.
func BenchmarkGradeAllLogs(b *testing.B) {
	jobs := referenceJobs(b, spectest.SharedDir(b))
	size := 0
	for _, j := range jobs {
		size += len(j.log)
	}
	b.SetBytes(int64(size))
	b.ReportMetric(float64(len(jobs)), "logs/op")
	patch := ""
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		for _, j := range jobs {
			if _, err := Grade(j.inst, j.log, &patch, GradeOptions{Rules: RulesV41, WholeLog: j.whole}); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu.report(b)
}

// BenchmarkGradeLargestLog grades the largest marker-era log of the
// reference set (target: <= 3 ms) and the largest log of any era (a
// pre-marker log, graded with --whole-log).
func BenchmarkGradeLargestLog(b *testing.B) {
	var bigMarker, bigAny gradeJob
	for _, j := range referenceJobs(b, spectest.SharedDir(b)) {
		if !j.whole && len(j.log) > len(bigMarker.log) {
			bigMarker = j
		}
		if len(j.log) > len(bigAny.log) {
			bigAny = j
		}
	}
	for _, c := range []struct {
		name string
		job  gradeJob
	}{{"marker-era", bigMarker}, {"any", bigAny}} {
		b.Run(c.name, func(b *testing.B) {
			big := c.job
			b.SetBytes(int64(len(big.log)))
			b.Logf("%s, %d bytes, whole-log=%v", big.inst.InstanceID, len(big.log), big.whole)
			patch := ""
			b.ResetTimer()
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				if _, err := Grade(big.inst, big.log, &patch, GradeOptions{Rules: RulesV41, WholeLog: big.whole}); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// BenchmarkParse100MB parses synthetic 10 MB and 100 MB logs, one pair per
// parser family, built from real line shapes (every line a status line, so
// denser than real logs), plus adversarial Django input (many "Testing
// against Django installed in" heads and no terminator, which upstream's
// regexp rescans for every head). Reports MB/s and CPU time; run with
// -benchtime 1x.
func BenchmarkParse100MB(b *testing.B) {
	const size = 100 << 20
	cases := []struct{ name, repo, block string }{
		{"pytest", "pytest-dev/pytest",
			"PASSED testing/test_capture.py::TestCaptureManager::test_capturing_basic_api[no]\n" +
				"FAILED tests/test_basic.py::test_options_work - DeprecationWarning: 'werkzeug...\n" +
				"INFO     root:test_global_capture_with_live_logging.py:17 something in test\n"},
		{"pytest_options", "psf/requests",
			"PASSED tests/test_requests.py::TestRequests::test_invalid_url[InvalidURL-http://*example.com]\n" +
				"ERROR tests/test_requests.py::TestRequests::test_unicode_get[/get-params0]\n"},
		{"pytest_v2", "sphinx-doc/sphinx",
			"\x1b[32mPASSED\x1b[0m tests/test_domain_py.py::\x1b[1mtest_function_signatures\x1b[0m\n" +
				"astropy/utils/tests/test_misc.py::test_isiterable PASSED\n" +
				"\x1b[01mreading sources... \x1b[39;49;00m[ 16%] \x1b[35mabbr\x1b[39;49;00m\n"},
		{"django", "django/django",
			"test_ticket12886 (aggregation.tests.AggregateTestCase) ... ok\n" +
				"test_values_annotation_with_expression (aggregation.tests.AggregateTestCase) ... Testing against Django installed in '/testbed/django'\n" +
				"Importing application aggregation\n  Applying sites.0002_alter_domain_unique... OK\n" +
				"System check identified no issues (0 silenced).\nok\n" +
				"FAIL: test_x (m.T)\n"},
		{"django_adversarial", "django/django",
			"test_a (m.T) ... Testing against Django installed in '/testbed/django' silenced).\n"},
		{"sympy", "sympy/sympy",
			"test_ccode_unused_array_arg F\ntest_empty_f_code ok\n" +
				"______ sympy/utilities/tests/test_codegen.py:test_ccode_unused_array_arg _______\n" +
				"  File \"/testbed/sympy/utilities/tests/test_codegen.py\", line 602, in test_ccode_unused_array_arg\n"},
		{"seaborn", "mwaskom/seaborn",
			"PASSED tests/_core/test_plot.py::TestInit::test_empty\ntests/test_core.py::TestX::test_y PASSED [ 10%]\n"},
		{"matplotlib", "matplotlib/matplotlib",
			"PASSED lib/matplotlib/tests/test_backend_bases.py::test_interactive_zoom[MouseButton.LEFT]\n"},
	}
	for _, c := range cases {
		// 10 MB and 100 MB of the same text: equal MB/s means linear time.
		for _, n := range []int{size / 10, size} {
			b.Run(c.name+"/"+itoa(n>>20)+"MB", func(b *testing.B) {
				// Distinct test names so the map grows as in a real huge log.
				var sb strings.Builder
				sb.Grow(n + 1024)
				for i := 0; sb.Len() < n; i++ {
					sb.WriteString(strings.ReplaceAll(c.block, "test_", "test_"+itoa(i%100000)+"_"))
				}
				log := sb.String()
				b.SetBytes(int64(len(log)))
				b.ResetTimer()
				cpu := startCPU()
				for i := 0; i < b.N; i++ {
					if _, err := ParseLog(c.repo, "", log); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	p := len(buf)
	for i > 0 {
		p--
		buf[p] = digits[i%10]
		i /= 10
	}
	return string(buf[p:])
}
