package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// NodeKind is the layer of the image graph.
type NodeKind string

// Node kinds.
const (
	KindBase     NodeKind = "base"
	KindEnv      NodeKind = "env"
	KindInstance NodeKind = "instance"
)

// Node is what the builder solves for one image: the Dockerfile, the build
// context files rendered here, and context files it must supply itself
// (External, e.g. rootfs-amd64.tar for the fixture profile's base).
type Node struct {
	Kind       NodeKind
	Key        string
	Parent     string // key of the parent image; "" for base
	Platform   core.Platform
	Dockerfile []byte
	Files      map[string][]byte
	External   []string
	// Pins are the ids of the pin rules that changed the recipe this node
	// was rendered from (Result.Pins): recorded with the image built.
	Pins []string
}

// Nodes returns the base, env and instance nodes of this result, in build
// order. Every call returns fresh maps and slices.
func (r *Result) Nodes() []Node {
	ociArch := r.Platform.GOARCH()
	ext := func(kind NodeKind) []string {
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
	return []Node{
		{Kind: KindBase, Key: r.BaseKey, Platform: r.Platform,
			Dockerfile: []byte(r.BaseDockerfile), Files: map[string][]byte{}, External: ext(KindBase), Pins: pins()},
		{Kind: KindEnv, Key: r.EnvKey, Parent: r.BaseKey, Platform: r.Platform,
			Dockerfile: []byte(r.EnvDockerfile), Files: map[string][]byte{FileSetupEnv: []byte(r.SetupEnv)}, External: ext(KindEnv), Pins: pins()},
		{Kind: KindInstance, Key: r.InstanceKey, Parent: r.EnvKey, Platform: r.Platform,
			Dockerfile: []byte(r.InstanceDockerfile), Files: map[string][]byte{FileSetupRepo: []byte(r.SetupRepo)}, External: ext(KindInstance), Pins: pins()},
	}
}
