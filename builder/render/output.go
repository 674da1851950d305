package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
)

// File is one rendered output file.
type File struct {
	Name string
	Data string
}

// File names written per instance and arch.
const (
	FileBaseDockerfile     = "Dockerfile.base"
	FileEnvDockerfile      = "Dockerfile.env"
	FileInstanceDockerfile = "Dockerfile.instance"
	FileSetupEnv           = "setup_env.sh"
	FileSetupRepo          = "setup_repo.sh"
	FileEval               = "eval.sh"
	FileMeta               = "meta.json"
)

// Meta is the meta.json written beside the rendered files.
type Meta struct {
	InstanceID string `json:"instance_id"`
	Repo       string `json:"repo"`
	Version    string `json:"version"`
	Language   string `json:"language"`
	Arch       string `json:"arch"`
	// Platform is how upstream's Dockerfiles write it ("linux/x86_64").
	Platform     string        `json:"platform"`
	OCIPlatform  core.Platform `json:"oci_platform"`
	BaseKey      string        `json:"base_image_key"`
	EnvKey       string        `json:"env_image_key"`
	InstanceKey  string        `json:"instance_image_key"`
	EnvYMLCached bool          `json:"env_yml_from_cache"`
	Pins         []string      `json:"pins"`
	X86Only      bool          `json:"x86_only"`
	// X86OnlyRule is what makes the instance x86-only (USE_X86, override
	// or a rule id of `swebuild pins list`).
	X86OnlyRule string `json:"x86_only_rule,omitempty"`
	Profile     string `json:"profile,omitempty"`
}

// Meta returns the meta.json content.
func (r *Result) Meta() Meta {
	pins := r.Pins
	if pins == nil {
		pins = []string{}
	}
	return Meta{
		InstanceID: r.InstanceID, Repo: r.Repo, Version: r.Version, Language: r.Language, Arch: r.Arch(),
		Platform: r.Platform.Dockerfile(), OCIPlatform: r.Platform,
		BaseKey: r.BaseKey, EnvKey: r.EnvKey, InstanceKey: r.InstanceKey,
		EnvYMLCached: r.EnvYMLCached, Pins: pins, X86Only: r.X86Only, X86OnlyRule: r.X86OnlyRule, Profile: r.Profile,
	}
}

// Files returns the seven output files in a fixed order.
func (r *Result) Files() ([]File, error) {
	meta, err := json.MarshalIndent(r.Meta(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding meta.json: %w", err)
	}
	return []File{
		{FileBaseDockerfile, r.BaseDockerfile},
		{FileEnvDockerfile, r.EnvDockerfile},
		{FileInstanceDockerfile, r.InstanceDockerfile},
		{FileSetupEnv, r.SetupEnv},
		{FileSetupRepo, r.SetupRepo},
		{FileEval, r.Eval},
		{FileMeta, string(meta) + "\n"},
	}, nil
}

// Dir is the output folder of a result below out: out/<instance_id>/<arch>.
func (r *Result) Dir(out string) string {
	return filepath.Join(out, r.InstanceID, r.Arch())
}

// WriteFiles writes the seven files into r.Dir(out).
func (r *Result) WriteFiles(out string) error {
	files, err := r.Files()
	if err != nil {
		return err
	}
	dir := r.Dir(out)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return writeFiles(dir, files)
}

// writeFiles writes each file into dir.
func writeFiles(dir string, files []File) error {
	for _, f := range files {
		if err := writeFile(dir+string(filepath.Separator)+f.Name, f.Data); err != nil {
			return err
		}
	}
	return nil
}

// mkdir creates dir, accepting an existing directory.
func mkdir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	return err
}

// Nodes returns the base, env and instance nodes of this result, in build
// order: Dockerfiles, the rendered scripts as in-memory context, and the
// profile's context files by name (graph.Node.External, e.g.
// rootfs-amd64.tar for the fixture profile's base). Every call returns fresh
// maps and slices.
func (r *Result) Nodes() []graph.Node {
	ociArch := r.Platform.GOARCH()
	ext := func(kind graph.Kind) []string {
		names := r.contextFiles[string(kind)]
		if len(names) == 0 {
			return nil
		}
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = strings.ReplaceAll(n, "{arch}", ociArch)
		}
		return out
	}
	pins := func() []string { return append([]string(nil), r.Pins...) }
	return []graph.Node{
		{Kind: graph.KindBase, Key: r.BaseKey, Platform: r.Platform,
			Dockerfile: []byte(r.BaseDockerfile), Context: map[string][]byte{}, External: ext(graph.KindBase), Pins: pins()},
		{Kind: graph.KindEnv, Key: r.EnvKey, Parents: []string{r.BaseKey}, Platform: r.Platform,
			Dockerfile: []byte(r.EnvDockerfile), Context: map[string][]byte{FileSetupEnv: []byte(r.SetupEnv)}, External: ext(graph.KindEnv), Pins: pins()},
		{Kind: graph.KindInstance, Key: r.InstanceKey, Parents: []string{r.EnvKey}, Platform: r.Platform,
			Dockerfile: []byte(r.InstanceDockerfile), Context: map[string][]byte{FileSetupRepo: []byte(r.SetupRepo)}, External: ext(graph.KindInstance), Pins: pins()},
	}
}
