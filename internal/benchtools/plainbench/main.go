//go:build linux

// Command plainbench measures what each remaining speed trick of the data
// path earns in the commands a person waits for (issue 13: a hand-written
// decoder, unsafe, madvise, raw syscalls and GC tuning stay only where they
// earn a measured share of a user-visible time).
//
// It builds swebuild from the working tree as it is, and once per variant
// with one trick replaced by its standard-library equivalent (go build
// -overlay: the tree itself is not changed; an edit that no longer matches
// the source is an error, so a moved trick cannot be measured by mistake).
// It checks that every variant writes the same files and prints the same
// plan as the unchanged build, then runs the commands in rounds, each round
// every build once in a fresh random order (so all see the same machine
// load), and prints per command and build the median wall time, CPU time
// (user+sys) and peak RSS, and the median over rounds of the variant's wall
// and CPU divided by the unchanged build's in the same round.
//
// Usage, from the repository root:
//
//	go run ./internal/benchtools/plainbench [-rounds N] [-variants a,b] [-commands a,b] [-shared DIR] [-out-base DIR]
//
// docs/generation.md ("What the fast paths earn") has the figures and the
// decisions taken from them.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// stdJSONL replaces the JSONL record decoder with encoding/json.
//
//go:embed stdjsonl.go.txt
var stdJSONL string

// openFileWrite is writeFile with os.OpenFile and File.WriteString.
//
//go:embed openfile.go.txt
var openFileWrite string

// edit replaces old, which must occur exactly once, with new in file.
type edit struct{ file, old, new string }

// variant is swebuild with one trick replaced.
type variant struct {
	name, what string
	edits      []edit
	remove     []string          // files left out of the build
	add        map[string]string // new files: path -> content
	renderOnly bool              // changes only what swebuild render does after loading
}

var variants = []variant{
	{name: "json", what: "encoding/json (v1) instead of the hand-written JSONL record decoder",
		edits: []edit{{"dataset/load.go", "func decodeJSONLChunk(", "func decodeJSONLChunkHandWritten("}},
		add:   map[string]string{"dataset/zz_stdjsonl.go": stdJSONL}},
	{name: "json-copy", what: "the hand-written decoder copying each kept string (string(b)) instead of sharing the file buffer",
		edits: []edit{
			{"dataset/json.go", "return unsafe.String(unsafe.SliceData(b), len(b))", "return string(b)"},
			{"dataset/json.go", "\t\"unsafe\"\n", ""},
		}},
	{name: "read-noadvise", what: "the dataset read without MADV_HUGEPAGE (the same sized buffer and io.ReadFull)",
		edits: []edit{{"dataset/readfile_linux.go", "\tadviseHuge(buf)\n", ""}}},
	{name: "read-readall", what: "the dataset read with io.ReadAll(io.LimitReader(f, max+1)) for every file",
		remove: []string{"dataset/readfile_linux.go"},
		edits:  []edit{{"dataset/readfile_other.go", "//go:build !linux\n", ""}}},
	{name: "write-os", renderOnly: true, what: "os.WriteFile instead of syscall.Open/Write/Close",
		remove: []string{"builder/render/write_unix.go"},
		edits:  []edit{{"builder/render/write_other.go", "//go:build !unix\n", ""}}},
	{name: "write-openfile", renderOnly: true, what: "os.OpenFile + File.WriteString (no copy) instead of syscall.Open/Write/Close",
		remove: []string{"builder/render/write_unix.go", "builder/render/write_other.go"},
		add:    map[string]string{"builder/render/zz_write.go": openFileWrite}},
	{name: "write-copy", renderOnly: true, what: "syscall.Write([]byte(data)) instead of an unsafe.Slice over the string",
		edits: []edit{
			{"builder/render/write_unix.go", "unsafe.Slice(unsafe.StringData(data), len(data))", "[]byte(data)"},
			{"builder/render/write_unix.go", "\t\"unsafe\"\n", ""},
		}},
	{name: "gc-default", renderOnly: true, what: "the default GOGC (100) while writing instead of 25",
		edits: []edit{
			{"cmd/swebuild/render.go", "\tif prev := debug.SetGCPercent(25); prev != 100 {\n\t\tdebug.SetGCPercent(prev) // GOGC set by the user: keep it\n\t} else {\n\t\tdefer debug.SetGCPercent(prev)\n\t}\n", ""},
			{"cmd/swebuild/render.go", "\t\"runtime/debug\"\n", ""},
		}},
}

// command is one user-visible swebuild command; OUT in args is its output
// directory.
type command struct {
	name   string
	args   []string
	output bool // writes OUT (else: compare stdout)
}

func main() {
	rounds := flag.Int("rounds", 21, "timed rounds (every build once per round)")
	only := flag.String("variants", "", "comma-separated variants to measure (default: all)")
	cmds := flag.String("commands", "", "comma-separated commands to time (default: all)")
	sharedDefault := "../shared/swebench-reference"
	if d := os.Getenv("SWEBUILD_SHARED"); d != "" {
		sharedDefault = d
	}
	shared := flag.String("shared", sharedDefault, "the shared upstream reference data (default $SWEBUILD_SHARED, else ../shared/swebench-reference)")
	outBase := flag.String("out-base", "", "where commands write (default: /dev/shm when writable, else the temp dir)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *rounds, split(*only), split(*cmds), *shared, *outBase); err != nil {
		fmt.Fprintln(os.Stderr, "plainbench:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func run(ctx context.Context, rounds int, only, cmdNames []string, shared, outBase string) error {
	if rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	if outBase == "" {
		outBase = os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && syscall.Access("/dev/shm", 2) == nil {
			outBase = "/dev/shm"
		}
	}
	work, err := os.MkdirTemp(outBase, "plainbench-")
	if err != nil {
		return fmt.Errorf("making a work directory: %w", err)
	}
	defer os.RemoveAll(work)

	ds := filepath.Join(shared, "datasets")
	verified := filepath.Join(ds, "SWE-bench_Verified", "test.jsonl")
	multilingual := filepath.Join(ds, "SWE-bench_Multilingual", "test.jsonl")
	mlmm := filepath.Join(work, "mlmm.jsonl")
	if err := concat(mlmm, multilingual, filepath.Join(ds, "SWE-bench_Multimodal", "dev.jsonl")); err != nil {
		return err
	}
	cache := filepath.Join(work, "cache") // --offline with an empty cache: nothing is fetched
	common := []string{"--cache-dir", cache, "--offline"}
	all := []command{
		{"render Verified", append([]string{"render", "--dataset", verified, "--arch", "all", "--pins", "none", "--out", "OUT"}, common...), true},
		{"render Multilingual+Multimodal", append([]string{"render", "--dataset", mlmm, "--arch", "all", "--pins", "none", "--out", "OUT"}, common...), true},
		{"plan Verified", append([]string{"plan", "--dataset", verified}, common...), false},
		{"plan Multilingual", append([]string{"plan", "--dataset", multilingual}, common...), false},
	}
	var commands []command
	for _, c := range all {
		if len(cmdNames) == 0 || slices.Contains(cmdNames, c.name) {
			commands = append(commands, c)
		}
	}
	if len(commands) == 0 {
		return fmt.Errorf("no command named %q (commands: render Verified, render Multilingual+Multimodal, plan Verified, plan Multilingual)", cmdNames)
	}

	builds := []string{"unchanged"}
	renderOnly := map[string]bool{}
	bin := map[string]string{"unchanged": filepath.Join(work, "bin", "unchanged")}
	if err := goBuild(ctx, bin["unchanged"], ""); err != nil {
		return err
	}
	for _, v := range variants {
		if len(only) > 0 && !slices.Contains(only, v.name) {
			continue
		}
		overlay, err := v.overlay(filepath.Join(work, "src", v.name))
		if err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		bin[v.name] = filepath.Join(work, "bin", v.name)
		if err := goBuild(ctx, bin[v.name], overlay); err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		builds = append(builds, v.name)
		renderOnly[v.name] = v.renderOnly
		fmt.Printf("%-15s %s\n", v.name, v.what)
	}

	// buildsFor are the builds a command is timed with.
	buildsFor := func(c command) []string {
		var out []string
		for _, b := range builds {
			if c.output || !renderOnly[b] {
				out = append(out, b)
			}
		}
		return out
	}
	// Same output from every build.
	for _, c := range commands {
		var want string
		for _, b := range buildsFor(c) {
			got, _, err := runOnce(ctx, bin[b], c, filepath.Join(work, "out"))
			if err != nil {
				return fmt.Errorf("%s (%s): %w", c.name, b, err)
			}
			if b == "unchanged" {
				want = got
			} else if got != want {
				return fmt.Errorf("%s: build %s gives other output than the unchanged build", c.name, b)
			}
		}
	}

	load0 := loadAvg()
	start := time.Now()
	times := map[string]map[string][]sample{} // command -> build -> per round
	for _, c := range commands {
		times[c.name] = map[string][]sample{}
	}
	for r := 0; r < rounds; r++ {
		for _, c := range commands {
			order := buildsFor(c)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, b := range order {
				_, s, err := runOnce(ctx, bin[b], c, filepath.Join(work, "out"))
				if err != nil {
					return fmt.Errorf("%s (%s): %w", c.name, b, err)
				}
				times[c.name][b] = append(times[c.name][b], s)
			}
		}
	}
	fmt.Printf("\n%s: %d rounds in %s on %d CPUs (GOMAXPROCS %d), load average %s at the start, %s at the end; %s\n\n",
		start.Format("2006-01-02"), rounds, time.Since(start).Round(time.Second), runtime.NumCPU(), runtime.GOMAXPROCS(0), load0, loadAvg(), runtime.Version())
	fmt.Println("| command | build | median wall | median CPU (user+sys) | peak RSS | wall / unchanged | CPU / unchanged |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range commands {
		base := times[c.name]["unchanged"]
		for _, b := range buildsFor(c) {
			ss := times[c.name][b]
			ratio := "—"
			cpuRatio := "—"
			if b != "unchanged" {
				ratio = fmt.Sprintf("x%.2f", median(pairs(ss, base, func(s sample) float64 { return s.wall })))
				cpuRatio = fmt.Sprintf("x%.2f", median(pairs(ss, base, func(s sample) float64 { return s.cpu })))
			}
			fmt.Printf("| %s | %s | %.3f s | %.3f s | %.1f MiB | %s | %s |\n", c.name, b,
				median(field(ss, func(s sample) float64 { return s.wall })),
				median(field(ss, func(s sample) float64 { return s.cpu })),
				median(field(ss, func(s sample) float64 { return s.rssMiB })), ratio, cpuRatio)
		}
	}
	return nil
}

// overlay writes the variant's changed files under dir and returns the
// path of a go build -overlay file replacing them.
func (v variant) overlay(dir string) (string, error) {
	replace := map[string]string{}
	changed := map[string]string{}
	for _, e := range v.edits {
		text, ok := changed[e.file]
		if !ok {
			b, err := os.ReadFile(e.file)
			if err != nil {
				return "", fmt.Errorf("reading the file to change: %w", err)
			}
			text = string(b)
		}
		if n := strings.Count(text, e.old); n != 1 {
			return "", fmt.Errorf("%s holds %q %d times, want once: the code changed, update plainbench", e.file, e.old, n)
		}
		changed[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	put := func(name, content string) error {
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			return err
		}
		abs, err := filepath.Abs(name)
		if err != nil {
			return err
		}
		replace[abs] = dst
		return nil
	}
	for name, content := range changed {
		if err := put(name, content); err != nil {
			return "", err
		}
	}
	for name, content := range v.add {
		if err := put(name, content); err != nil {
			return "", err
		}
	}
	for _, name := range v.remove {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("file to leave out: %w", err)
		}
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		replace[abs] = ""
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}

func goBuild(ctx context.Context, out, overlay string) error {
	args := []string{"build", "-o", out}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/swebuild")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// sample is one timed run.
type sample struct{ wall, cpu, rssMiB float64 }

// runOnce runs c with a fresh output directory out and returns a digest of
// what it produced (the files written, or stdout) and its times.
func runOnce(ctx context.Context, bin string, c command, out string) (string, sample, error) {
	if err := os.RemoveAll(out); err != nil {
		return "", sample{}, err
	}
	args := make([]string, len(c.args))
	for i, a := range c.args {
		if a == "OUT" {
			a = out
		}
		args[i] = a
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return "", sample{}, fmt.Errorf("%v\n%s", err, stderr.String())
	}
	st := cmd.ProcessState
	s := sample{wall: wall.Seconds(), cpu: (st.UserTime() + st.SystemTime()).Seconds()}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		s.rssMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	if !c.output {
		sum := sha256.Sum256(stdout.Bytes())
		return fmt.Sprintf("%x", sum), s, nil
	}
	digest, err := treeDigest(out)
	return digest, s, err
}

// treeDigest hashes every file's path and content under dir.
func treeDigest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading the output: %w", err)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func concat(dst string, srcs ...string) error {
	var all []byte
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return fmt.Errorf("reading a dataset: %w", err)
		}
		all = append(all, b...)
	}
	return os.WriteFile(dst, all, 0o644)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func field(ss []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// pairs returns the per-round ratios a[i]/b[i].
func pairs(a, b []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = f(a[i]) / f(b[i])
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
