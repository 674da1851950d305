package render

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/dataset"
)

// InstanceError is a failed render of one instance (and arch, when only
// one failed).
type InstanceError struct {
	InstanceID string
	Arch       string
	Source     string // dataset file:line, when known
	Err        error
}

func (e *InstanceError) Error() string {
	src := ""
	if e.Source != "" {
		src = e.Source + ": "
	}
	arch := ""
	if e.Arch != "" {
		arch = " (" + e.Arch + ")"
	}
	return fmt.Sprintf("%s%s%s: %v", src, e.InstanceID, arch, e.Err)
}

func (e *InstanceError) Unwrap() error { return e.Err }

// WriteAll renders every instance for every platform and writes the files under
// out/<instance_id>/<arch>/, jobs instances at a time (0: 4 per CPU, since
// most of the time is spent in file system calls). It keeps going after
// failures and returns how many (instance, arch) renders were written and the
// failures in input order.
func (r *Renderer) WriteAll(ctx context.Context, insts []dataset.Instance, platforms []core.Platform, out string, jobs int) (int, []*InstanceError) {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0) * 4
	}
	if err := mkdir(out); err != nil {
		return 0, []*InstanceError{{InstanceID: "*", Err: fmt.Errorf("creating %s: %w", out, err)}}
	}
	errs := make([]*InstanceError, len(insts))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := range next {
				k, err := r.writeInstance(ctx, &insts[i], platforms, out)
				n += k
				if err != nil {
					errs[i] = &InstanceError{InstanceID: insts[i].InstanceID, Source: insts[i].Source, Err: err}
				}
			}
			mu.Lock()
			written += n
			mu.Unlock()
		}()
	}
	for i := range insts {
		next <- i
	}
	close(next)
	wg.Wait()
	var failed []*InstanceError
	for _, e := range errs {
		if e != nil {
			failed = append(failed, e)
		}
	}
	return written, failed
}

func (r *Renderer) writeInstance(ctx context.Context, inst *dataset.Instance, platforms []core.Platform, out string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if id := inst.InstanceID; id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return 0, fmt.Errorf("instance_id %q cannot be used as a directory name", id)
	}
	results, err := r.RenderArches(ctx, inst, platforms)
	if err != nil {
		return 0, err
	}
	idDir := filepath.Join(out, inst.InstanceID)
	if err := mkdir(idDir); err != nil {
		return 0, fmt.Errorf("creating %s: %w", idDir, err)
	}
	for i, res := range results {
		files, err := res.Files()
		if err != nil {
			return i, err
		}
		dir := filepath.Join(idDir, res.Arch())
		if err := mkdir(dir); err != nil {
			return i, fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := writeFiles(dir, files); err != nil {
			return i, err
		}
	}
	return len(results), nil
}
