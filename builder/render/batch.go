package render

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/core"
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

// Layout is how WriteAllLayout writes each (instance, arch).
type Layout string

// Layouts.
const (
	// LayoutLayered: Dockerfile.base/env/instance, setup_env.sh,
	// setup_repo.sh, eval.sh, meta.json (upstream v4's three images).
	LayoutLayered Layout = "layered"
	// LayoutFlat: one self-contained Dockerfile (v5's form, see
	// Result.Flat), eval.sh, meta.json.
	LayoutFlat Layout = "flat"
)

// ParseLayout accepts "layered" and "flat".
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case LayoutLayered, LayoutFlat:
		return l, nil
	}
	return "", fmt.Errorf("unknown layout %q (want layered or flat)", s)
}

// FlatFiles are the flat layout's files of a result: Dockerfile (Flat),
// eval.sh and meta.json.
func (r *Result) FlatFiles(imageAssets string) ([]File, error) {
	flat, err := r.Flat(imageAssets)
	if err != nil {
		return nil, err
	}
	files, err := r.Files()
	if err != nil {
		return nil, err
	}
	out := []File{{FileFlatDockerfile, flat}}
	for _, f := range files {
		if f.Name == FileEval || f.Name == FileMeta {
			out = append(out, f)
		}
	}
	return out, nil
}

// WriteAll renders every instance for every platform and writes the files under
// out/<instance_id>/<arch>/, jobs instances at a time (0: 4 per CPU, since
// most of the time is spent in file system calls). It keeps going after
// failures and returns how many (instance, arch) renders were written and the
// failures in input order.
func (r *Renderer) WriteAll(ctx context.Context, insts []core.Instance, platforms []core.Platform, out string, jobs int) (int, []*InstanceError) {
	return r.WriteAllLayout(ctx, insts, platforms, out, jobs, LayoutLayered)
}

// WriteAllLayout is WriteAll in the given layout (out/<instance_id>/<arch>/
// holds the layout's files).
func (r *Renderer) WriteAllLayout(ctx context.Context, insts []core.Instance, platforms []core.Platform, out string, jobs int, layout Layout) (int, []*InstanceError) {
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
				k, err := r.writeInstance(ctx, &insts[i], platforms, out, layout)
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

func (r *Renderer) writeInstance(ctx context.Context, inst *core.Instance, platforms []core.Platform, out string, layout Layout) (int, error) {
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
		var files []File
		if layout == LayoutFlat {
			files, err = res.FlatFiles(inst.ImageAssets)
		} else {
			files, err = res.Files()
		}
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
