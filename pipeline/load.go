package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/dataset"
	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/fetch"
	"github.com/swebuild/swebuild/pins"
)

// Inputs say what to generate from: the dataset, which of its instances,
// the extra spec profiles and the pin set.
type Inputs struct {
	// Dataset is a file (JSONL, JSON array, parquet) or a hub dataset
	// NAME[@REVISION][:SPLIT] (see dataset.Open).
	Dataset string
	// Instances selects instance ids (empty: all).
	Instances []string
	// Specs is an extra specs file with data-defined profiles (the
	// offline fixture's testdata/fixture/specs.json); empty: none.
	Specs string
	// Pins selects the pin rules (pins.Parse): "none", "default",
	// "default,-ID", "ID,ID"; -ID of an x86-only rule lifts it.
	Pins string
	// SpecsVersion names the upstream tables: spec.VersionV410 ("4.1.0",
	// also "") or spec.VersionFinal ("final", upstream 2514c86).
	SpecsVersion string
	// CacheDir holds downloads: hub datasets under hub/, requirements and
	// environment files under http/ (required).
	CacheDir string
	// Offline never downloads: what is not cached fails, naming it.
	Offline bool
	// Hub is where hub datasets come from.
	Hub HubOptions
	// Log receives download progress and the list of invalid records.
	Log io.Writer
}

// HubOptions configure the dataset hub client.
type HubOptions struct {
	// Endpoint is the hub's base URL (empty: the public hub).
	Endpoint string
	// Token is sent to the hub (never to the CDN it redirects to).
	Token string
}

// Loaded is what Load read: the renderer (tables, profiles, pins, the
// downloader for requirements files), the selected instances and where
// they came from.
type Loaded struct {
	Renderer  *render.Renderer
	Instances []dataset.Instance
	// Source is the dataset file, or NAME@COMMIT:SPLIT for a hub dataset
	// (core.Image.Dataset).
	Source dataset.Source
	// Fetch is the renderer's downloader of requirements.txt and
	// environment.yml (Fetch.Unreachable: what could not be fetched for want
	// of a network).
	Fetch *fetch.Client
}

// ErrNoDataset is returned by Load when Inputs.Dataset is empty.
var ErrNoDataset = errors.New("no dataset given")

// Load reads the spec tables, the extra profiles, the pins and the dataset,
// and selects the instances. A dataset with invalid records gives the valid
// ones and an error naming how many were invalid (each is listed to
// in.Log); any other problem gives a nil *Loaded.
func Load(ctx context.Context, in Inputs) (*Loaded, error) {
	if in.Dataset == "" {
		return nil, ErrNoDataset
	}
	log := in.Log
	if log == nil {
		log = io.Discard
	}
	tables, err := spec.LoadVersion(in.SpecsVersion)
	if err != nil {
		return nil, err
	}
	if in.Specs != "" {
		if err := tables.LoadExtra(in.Specs); err != nil {
			return nil, err
		}
	}
	set, err := pins.Parse(in.Pins)
	if err != nil {
		return nil, fmt.Errorf("pin set: %w", err)
	}
	if err := tables.LiftX86Rules(set.LiftedX86()...); err != nil {
		return nil, fmt.Errorf("pin set: %w", err)
	}
	if in.CacheDir == "" {
		return nil, errors.New("no cache directory given (downloads are cached there)")
	}
	client, err := fetch.New(fetch.Options{CacheDir: filepath.Join(in.CacheDir, "http"), Offline: in.Offline, Log: in.Log})
	if err != nil {
		return nil, fmt.Errorf("setting up downloads: %w", err)
	}
	hc, err := hub.New(hub.Options{Endpoint: in.Hub.Endpoint, Token: in.Hub.Token, CacheDir: filepath.Join(in.CacheDir, "hub"), Offline: in.Offline, Log: log})
	if err != nil {
		return nil, fmt.Errorf("dataset hub: %w", err)
	}
	opts := dataset.OpenOptions{LoadOptions: dataset.LoadOptions{Known: tables}, Hub: hc}
	insts, src, loadErr := dataset.Open(ctx, in.Dataset, opts)
	var verr *dataset.ValidationError
	if loadErr != nil && !errors.As(loadErr, &verr) {
		return nil, loadErr
	}
	if verr != nil {
		fmt.Fprintln(log, verr.Error())
	}
	insts, err = dataset.Select(insts, in.Instances)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Renderer: &render.Renderer{Tables: tables, Pins: set, Fetcher: fetcher{client}}, Instances: insts, Source: src, Fetch: client}
	if verr != nil {
		return l, fmt.Errorf("%s: %d invalid record(s)", src, len(verr.Problems))
	}
	return l, nil
}

// loadKeepGoing is Load for a stage that goes on with the valid records:
// invalid ones are the first problem, anything else is the error.
func loadKeepGoing(ctx context.Context, in Inputs, log io.Writer) (*Loaded, []error, error) {
	in.Log = log
	loaded, err := Load(ctx, in)
	if loaded == nil {
		return nil, nil, err
	}
	if err != nil {
		return loaded, []error{err}, nil
	}
	return loaded, nil, nil
}

// fetcher gives render the fetch client: like upstream, any final non-200
// answer means "try the next candidate path".
type fetcher struct{ c *fetch.Client }

func (f fetcher) Fetch(ctx context.Context, url string) (string, bool, error) {
	b, err := f.c.Get(ctx, url)
	var he *fetch.HTTPError
	if errors.As(err, &he) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return fetch.DecodeText(b), true, nil
}
