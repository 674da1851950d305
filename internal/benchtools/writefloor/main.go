// Command writefloor writes a file tree of given shape and nothing else: the
// directories and files (same relative paths and sizes) that `swebuild
// render` writes, with no dataset to load and nothing to render. Its whole
// process time is the floor under `swebuild render` on a machine: what the
// kernel and process start-up cost for that many files, however fast the
// rendering were. scripts/bench-render.sh runs it beside swebuild render.
//
// Usage: writefloor -list FILE -out DIR [-jobs N]
//
// FILE has one "relative/path size" line per file (find DIR -type f -printf
// '%P %s\n'). Files are written with open/write/close, in N goroutines
// (default 4 per CPU, as swebuild render), one directory of files per task.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

type file struct {
	name string
	size int
}

func main() {
	list := flag.String("list", "", "file listing \"relative/path size\" per line")
	out := flag.String("out", "", "directory to write (must not exist)")
	jobs := flag.Int("jobs", 4*runtime.GOMAXPROCS(0), "concurrent writers")
	flag.Parse()
	if err := run(*list, *out, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "writefloor:", err)
		os.Exit(1)
	}
}

func run(list, out string, jobs int) error {
	if list == "" || out == "" {
		return fmt.Errorf("-list and -out are required")
	}
	f, err := os.Open(list)
	if err != nil {
		return err
	}
	defer f.Close()
	dirs := map[string][]file{}
	maxSize := 0
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		path, sizeText, ok := strings.Cut(sc.Text(), " ")
		size, err := strconv.Atoi(sizeText)
		if !ok || err != nil || size < 0 || path == "" || filepath.IsAbs(path) || strings.Contains(path, "..") {
			return fmt.Errorf("%s:%d: want \"relative/path size\", got %q", list, line, sc.Text())
		}
		dir, name := filepath.Split(path)
		dirs[dir] = append(dirs[dir], file{name, size})
		maxSize = max(maxSize, size)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", list, err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	data := make([]byte, maxSize)
	for i := range data {
		data[i] = 'x'
	}
	tasks := make(chan string)
	errs := make(chan error, jobs)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range tasks {
				dir := filepath.Join(out, d)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					errs <- err
					return
				}
				for _, fl := range dirs[d] {
					if err := write(dir+"/"+fl.name, data[:fl.size]); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for _, d := range names {
		tasks <- d
	}
	close(tasks)
	wg.Wait()
	close(errs)
	return <-errs
}

// write is open, write, close: the same system calls swebuild render makes
// per file.
func write(path string, b []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(fd)
			return fmt.Errorf("writing %s: %w", path, err)
		}
		b = b[n:]
	}
	return syscall.Close(fd)
}
