package builder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	continuityfs "github.com/containerd/continuity/fs"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/tonistiigi/fsutil"

	"github.com/swebuild/swebuild/builder/graph"
)

// A node with a context directory (graph.Node.ContextDir) is a task repo's flat
// Dockerfile: its task directory is the whole build context, sent by one
// local source of that directory and nothing else. BuildKit would only find
// a missing COPY source after solving every step before it (for a
// Multimodal task, after the whole toolchain install), so the Dockerfile is
// parsed with BuildKit's own parser first and a source that is not in the
// directory fails the node before anything is solved.

// CopySource is one source path of a COPY or ADD that reads the build
// context.
type CopySource struct {
	// Path is the source as written (a glob is allowed).
	Path string
	// Instruction is COPY or ADD; Line its first line in the Dockerfile.
	Instruction string
	Line        int
}

// CopySources parses dockerfile with BuildKit's Dockerfile parser and
// returns every COPY/ADD source that reads the build context: not COPY
// --from, not ADD of a URL or git repository, not a heredoc.
func CopySources(dockerfile []byte) ([]CopySource, error) {
	res, err := parser.Parse(bytes.NewReader(dockerfile))
	if err != nil {
		return nil, fmt.Errorf("parsing Dockerfile: %w", err)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, fmt.Errorf("parsing Dockerfile: %w", err)
	}
	var out []CopySource
	add := func(kind string, loc []parser.Range, srcs []string) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		for _, s := range srcs {
			out = append(out, CopySource{Path: s, Instruction: kind, Line: line})
		}
	}
	for _, st := range stages {
		for _, cmd := range st.Commands {
			switch c := cmd.(type) {
			case *instructions.CopyCommand:
				if c.From == "" {
					add("COPY", c.Location(), c.SourcePaths)
				}
			case *instructions.AddCommand:
				var local []string
				for _, s := range c.SourcePaths {
					if !isRemoteSource(s) {
						local = append(local, s)
					}
				}
				add("ADD", c.Location(), local)
			}
		}
	}
	return out, nil
}

// isRemoteSource tells an ADD source that is fetched (URL, git) from one
// read from the context.
func isRemoteSource(s string) bool {
	for _, p := range []string{"http://", "https://", "git://", "git@", "ssh://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// checkCopySources checks that every COPY/ADD source of the Dockerfile is
// in dir, as BuildKit resolves it: relative to the context root, a leading
// "/" or "../" never leaving it, and symbolic links (the source's own and
// its directories') followed inside the context, an absolute target taken
// from the context root, a "../" stopping there (continuity's
// fs.RootPath, what BuildKit's copy uses). A link that leaves the context
// or leads nowhere is refused here, as BuildKit refuses it after solving
// every step before the COPY ("failed to compute cache key: ... not
// found"). A glob is expanded and each match checked so. A source holding
// a build argument ($) is not checked (its value is known only to the
// frontend).
func checkCopySources(dockerfile []byte, dir string) error {
	srcs, err := CopySources(dockerfile)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range srcs {
		if strings.Contains(s.Path, "$") {
			continue
		}
		where := fmt.Sprintf("Dockerfile line %d: %s source %q", s.Line, s.Instruction, s.Path)
		rel := path.Clean("/" + filepath.ToSlash(s.Path))
		if strings.ContainsAny(rel, "*?[") {
			m, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(rel)))
			if err != nil || len(m) == 0 {
				errs = append(errs, fmt.Errorf("%s matches no file in the context directory %s", where, dir))
				continue
			}
			for _, match := range m {
				r, err := filepath.Rel(dir, match)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: match %s: %w", where, match, err))
					continue
				}
				if err := inContext(dir, "/"+filepath.ToSlash(r)); err != nil {
					errs = append(errs, fmt.Errorf("%s: its match %q %w", where, filepath.ToSlash(r), err))
				}
			}
			continue
		}
		if err := inContext(dir, rel); err != nil {
			errs = append(errs, fmt.Errorf("%s %w", where, err))
		}
	}
	return errors.Join(errs...)
}

// inContext checks that rel ("/"-rooted, slash-separated) names something
// in dir when symbolic links are followed inside dir, as BuildKit follows
// them; the error completes "COPY source X ...".
func inContext(dir, rel string) error {
	host := filepath.Join(dir, filepath.FromSlash(rel))
	resolved, err := continuityfs.RootPath(dir, filepath.FromSlash(rel))
	if err == nil {
		if _, err = os.Lstat(resolved); err == nil {
			return nil
		}
	}
	if _, lerr := os.Lstat(host); lerr != nil {
		return fmt.Errorf("is not in the context directory %s", dir)
	}
	// Something is there on the host, through a symbolic link that
	// BuildKit does not follow out of the context.
	link := ""
	if target, rerr := os.Readlink(host); rerr == nil {
		link = fmt.Sprintf(" (%s -> %s)", filepath.ToSlash(strings.TrimPrefix(rel, "/")), target)
	}
	return fmt.Errorf("is a symbolic link, or under one%s, whose target is not in the context directory %s: BuildKit follows links inside the context and would not find it", link, dir)
}

// contextDirState is the LLB state of n's context directory (one local
// source, added to mounts), after checking the Dockerfile's COPY sources.
func contextDirState(n *graph.Node, mounts map[string]fsutil.FS) (llb.State, error) {
	what := "node " + n.ID()
	if n.InstanceID != "" {
		what = "task " + n.InstanceID
	}
	fi, err := os.Stat(n.ContextDir)
	if err != nil || !fi.IsDir() {
		return llb.State{}, fmt.Errorf("%s: context directory %s: not a directory (%v)", what, n.ContextDir, err)
	}
	if err := checkCopySources(n.Dockerfile, n.ContextDir); err != nil {
		return llb.State{}, fmt.Errorf("%s: %w", what, err)
	}
	h := sha256.Sum256([]byte(n.ContextDir))
	localName := "swebuild-dir-" + hex.EncodeToString(h[:8])
	if _, ok := mounts[localName]; !ok {
		fs, err := fsutil.NewFS(n.ContextDir)
		if err != nil {
			return llb.State{}, fmt.Errorf("%s: opening context directory %s: %w", what, n.ContextDir, err)
		}
		mounts[localName] = fs
	}
	return llb.Local(localName,
		llb.SharedKeyHint(localName),
		llb.WithCustomName("[internal] swebuild load context "+n.ContextDir)), nil
}
