package render

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/swebuild/swebuild/dataset"
)

// InstanceError is a failed render of one instance and arch.
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
	return fmt.Sprintf("%s%s (%s): %v", src, e.InstanceID, e.Arch, e.Err)
}

func (e *InstanceError) Unwrap() error { return e.Err }

// WriteAll renders every instance for every arch and writes the files under
// out/<instance_id>/<arch>/, jobs at a time (0: GOMAXPROCS*4, since most of
// the time is spent in file system calls). It keeps going after failures and
// returns how many renders were written and the failures in input order.
func (r *Renderer) WriteAll(ctx context.Context, insts []dataset.Instance, arches []string, out string, jobs int) (int, []*InstanceError) {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0) * 4
	}
	type task struct{ i, a int }
	errs := make([]*InstanceError, len(insts)*len(arches))
	tasks := make(chan task)
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for tk := range tasks {
				inst := &insts[tk.i]
				arch := arches[tk.a]
				fail := func(err error) {
					errs[tk.i*len(arches)+tk.a] = &InstanceError{InstanceID: inst.InstanceID, Arch: arch, Source: inst.Source, Err: err}
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					continue
				}
				res, err := r.Render(ctx, inst, arch)
				if err != nil {
					fail(err)
					continue
				}
				if err := res.WriteFiles(out); err != nil {
					fail(err)
					continue
				}
				n++
			}
			mu.Lock()
			written += n
			mu.Unlock()
		}()
	}
	for i := range insts {
		for a := range arches {
			tasks <- task{i, a}
		}
	}
	close(tasks)
	wg.Wait()
	var failed []*InstanceError
	for _, e := range errs {
		if e != nil {
			failed = append(failed, e)
		}
	}
	return written, failed
}
