package pipeline

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/swebuild/swebuild/builder"
)

// BuilderFlags are BuildKit's side of a build as a command line gives it
// (`swebuild build`, `ci envs`, `ci repair`): text, read into
// builder.Options by Options; the messages name the flags.
type BuilderFlags struct {
	// Builders are --builder values ([PLATFORM=]ADDR); PoolFile a file of
	// more (--pool).
	Builders []string
	PoolFile string
	// DownAfter marks a node that does not answer for this long down.
	DownAfter time.Duration
	Workers   int
	Push      string
	// Outputs are --output values (one OCI layout at most).
	Outputs            []string
	CacheFrom, CacheTo []string
	Progress           string
	ProgressOut        io.Writer
	// RunDir holds per-node logs (default runs/build-<UTC time>).
	RunDir string
	// BuildContexts are KEY=docker-image://REF values.
	BuildContexts []string
	// Reproducible asks for reproducible images dated SourceDateEpoch
	// (seconds; "" or the default when not asked).
	Reproducible    bool
	SourceDateEpoch string
	BuilderID       string
}

// Options reads the flags into the builder's options (no credentials).
func (f BuilderFlags) Options() (builder.Options, error) {
	opts := builder.Options{Workers: f.Workers, Push: f.Push, Progress: f.Progress, ProgressOut: f.ProgressOut,
		RunDir: f.RunDir, BuilderID: f.BuilderID}
	switch f.Progress {
	case "auto", "tty", "plain", "rawjson", "quiet":
	default:
		return opts, fmt.Errorf("--progress %q: want auto, tty, plain, rawjson or quiet", f.Progress)
	}
	var err error
	if opts.Builders, err = f.builders(); err != nil {
		return opts, err
	}
	if f.DownAfter <= 0 {
		return opts, fmt.Errorf("--node-down-after %s: want a positive duration", f.DownAfter)
	}
	opts.Pool.DownAfter = f.DownAfter
	if opts.Output, err = f.output(); err != nil {
		return opts, err
	}
	if opts.Images, err = f.images(); err != nil {
		return opts, err
	}
	if opts.CacheFrom, err = parseAll("--cache-from", f.CacheFrom, builder.ParseCacheOption); err != nil {
		return opts, err
	}
	if opts.CacheTo, err = parseAll("--cache-to", f.CacheTo, builder.ParseCacheOption); err != nil {
		return opts, err
	}
	if opts.Reproducible, err = f.reproducible(); err != nil {
		return opts, err
	}
	if opts.RunDir == "" {
		opts.RunDir = filepath.Join("runs", "build-"+time.Now().UTC().Format("20060102-150405"))
	}
	return opts, nil
}

// builders are the --builder daemons, then the --pool file's.
func (f BuilderFlags) builders() ([]builder.BuilderSpec, error) {
	out, err := parseAll("--builder", f.Builders, builder.ParseBuilder)
	if err != nil {
		return nil, err
	}
	if f.PoolFile != "" {
		specs, err := builder.ReadPoolFile(f.PoolFile)
		if err != nil {
			return nil, fmt.Errorf("--pool: %w", err)
		}
		out = append(out, specs...)
	}
	return out, nil
}

// output is the one --output, nil when none.
func (f BuilderFlags) output() (*builder.Output, error) {
	switch len(f.Outputs) {
	case 0:
		return nil, nil
	case 1:
		o, err := builder.ParseOutput(f.Outputs[0])
		if err != nil {
			return nil, fmt.Errorf("--output: %w", err)
		}
		return &o, nil
	}
	return nil, fmt.Errorf("--output given %d times: one OCI layout directory holds every image", len(f.Outputs))
}

// images are the --build-context images by key, nil when none.
func (f BuilderFlags) images() (map[string]string, error) {
	var images map[string]string
	for _, v := range f.BuildContexts {
		key, src, ok := strings.Cut(v, "=")
		ref, isImage := strings.CutPrefix(src, "docker-image://")
		if !ok || key == "" || !isImage || ref == "" {
			return nil, fmt.Errorf("--build-context %q: want KEY=docker-image://REF", v)
		}
		if images == nil {
			images = map[string]string{}
		}
		images[key] = ref
	}
	return images, nil
}

// parseAll reads each value of a repeatable flag with parse.
func parseAll[T any](flag string, vals []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, v := range vals {
		e, err := parse(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// reproducible is --reproducible's setting; --source-date-epoch alone
// (other than its default) is an error.
func (f BuilderFlags) reproducible() (*builder.Reproducible, error) {
	if f.Reproducible {
		sde, err := builder.ParseSourceDateEpoch(f.SourceDateEpoch)
		if err != nil {
			return nil, fmt.Errorf("--source-date-epoch: %w", err)
		}
		return &builder.Reproducible{SourceDateEpoch: sde}, nil
	}
	if f.SourceDateEpoch != "" && f.SourceDateEpoch != strconv.FormatInt(builder.DefaultSourceDateEpoch, 10) {
		// "" is a command that has no --source-date-epoch (ci envs, ci
		// repair): nothing was asked for.
		return nil, errors.New("--source-date-epoch is only used with --reproducible")
	}
	return nil, nil
}
