package verify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/moby/buildkit/client/llb"
	"github.com/tonistiigi/fsutil"
	fstypes "github.com/tonistiigi/fsutil/types"
)

// InputsMount is the name of the session's local mount through which a run
// gets its input files (the wrapper, the patch, eval.sh) into the
// container. BuildKit moves a local mount's files over the session's file
// transfer, a stream; files written into the LLB definition instead
// (llb.Mkfile) travel inside one gRPC message, which BuildKit limits to
// 16 MiB, so a large patch or eval.sh could not be verified at all.
const InputsMount = "swebuild-verify-inputs"

// InputFS is the in-memory file tree behind InputsMount: one directory per
// run in progress, named by the run's id, added just before the run's solve
// and removed after it. It is safe for concurrent use, so one InputFS can
// serve every run of a build session.
type InputFS struct {
	mu   sync.Mutex
	dirs map[string]map[string]inputFile
}

type inputFile struct {
	data []byte
	mode os.FileMode
}

// NewInputFS returns an empty InputFS.
func NewInputFS() *InputFS { return &InputFS{dirs: map[string]map[string]inputFile{}} }

var _ fsutil.FS = (*InputFS)(nil)

// add makes the directory id holding files (name -> file); remove drops it.
func (f *InputFS) add(id string, files map[string]inputFile) error {
	if !plainName(id) {
		return fmt.Errorf("run input directory %q is not a plain name", id)
	}
	for name := range files {
		if !plainName(name) {
			return fmt.Errorf("run input file %q is not a plain name", name)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.dirs[id]; dup {
		return fmt.Errorf("run input directory %s exists already", id)
	}
	f.dirs[id] = files
	return nil
}

func (f *InputFS) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.dirs, id)
}

// state is the LLB source of run id's input directory, to mount at inDir:
// only that directory is sent (the include pattern), and into a cache record
// of its own (the shared key), so concurrent runs never wait on each other.
func (f *InputFS) state(id string) llb.State {
	return llb.Local(InputsMount, llb.IncludePatterns([]string{id}), llb.SharedKeyHint(InputsMount+"/"+id),
		llb.WithCustomName("[verify] inputs"))
}

// Walk calls fn for every directory and file under target ("" or "/": all),
// in lexical order, directories before their files, as fsutil expects;
// filepath.SkipDir and filepath.SkipAll are honoured.
func (f *InputFS) Walk(ctx context.Context, target string, fn fs.WalkDirFunc) error {
	target = strings.TrimPrefix(path.Clean("/"+target), "/")
	f.mu.Lock()
	ids := make([]string, 0, len(f.dirs))
	for id := range f.dirs {
		if target == "" || target == id || strings.HasPrefix(target, id+"/") {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	type dir struct {
		id    string
		names []string
		files map[string]inputFile
	}
	dirs := make([]dir, 0, len(ids))
	for _, id := range ids {
		d := dir{id: id, files: f.dirs[id]}
		for name := range d.files {
			if target == "" || target == id || target == id+"/"+name {
				d.names = append(d.names, name)
			}
		}
		sort.Strings(d.names)
		dirs = append(dirs, d)
	}
	f.mu.Unlock()

	for _, d := range dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if target == "" || target == d.id {
			st := &fstypes.Stat{Path: d.id, Mode: uint32(os.ModeDir | 0o755)}
			err := fn(d.id, &fsutil.DirEntryInfo{Stat: st}, nil)
			if err == filepath.SkipDir {
				continue
			}
			if err == filepath.SkipAll {
				return nil
			}
			if err != nil {
				return err
			}
		}
		for _, name := range d.names {
			file := d.files[name]
			p := d.id + "/" + name
			st := &fstypes.Stat{Path: p, Mode: uint32(file.mode.Perm()), Size: int64(len(file.data))}
			err := fn(p, &fsutil.DirEntryInfo{Stat: st}, nil)
			if err == filepath.SkipDir {
				break
			}
			if err == filepath.SkipAll {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Open opens the file at p ("<id>/<name>").
func (f *InputFS) Open(p string) (io.ReadCloser, error) {
	id, name, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if ok {
		f.mu.Lock()
		file, found := f.dirs[id][name]
		f.mu.Unlock()
		if found {
			return io.NopCloser(bytes.NewReader(file.data)), nil
		}
	}
	return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
}
