package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// datasetFlags are the dataset half of the input flags (genInputs, every
// command that reads records; pins list reads datasets with them too):
// --dataset, --offline, --cache-dir, with the environment they default
// from, read once here.
type datasetFlags struct {
	dataset  string
	offline  bool
	cacheDir string
	env      datasetEnv
}

// datasetEnv is the environment the dataset flags use.
type datasetEnv struct {
	cacheRoot  string // $SWEBUILD_CACHE, else $XDG_CACHE_HOME/swebuild, else ~/.cache/swebuild
	hfEndpoint string // $HF_ENDPOINT (huggingface_hub's name), default the hub
	hfToken    string // $HF_TOKEN
	hfOffline  bool   // $HF_HUB_OFFLINE, as huggingface_hub reads it
	// buildkitHost is $BUILDKIT_HOST, the default BuildKit address.
	buildkitHost string
}

func readDatasetEnv() datasetEnv {
	e := datasetEnv{hfEndpoint: os.Getenv("HF_ENDPOINT"), hfToken: os.Getenv("HF_TOKEN"), buildkitHost: os.Getenv("BUILDKIT_HOST")}
	switch strings.ToUpper(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "ON", "YES", "TRUE":
		e.hfOffline = true
	}
	switch {
	case os.Getenv("SWEBUILD_CACHE") != "":
		e.cacheRoot = os.Getenv("SWEBUILD_CACHE")
	case filepath.IsAbs(os.Getenv("XDG_CACHE_HOME")):
		e.cacheRoot = filepath.Join(os.Getenv("XDG_CACHE_HOME"), "swebuild")
	default:
		if home, err := os.UserHomeDir(); err == nil {
			e.cacheRoot = filepath.Join(home, ".cache", "swebuild")
		}
	}
	return e
}

func (d *datasetFlags) register(fs *pflag.FlagSet) {
	d.env = readDatasetEnv()
	fs.StringVar(&d.dataset, "dataset", "", "dataset: a JSONL, JSON array or parquet file, or a Hugging Face dataset NAME[@REVISION][:SPLIT] (split default test; $HF_ENDPOINT, $HF_TOKEN)")
	fs.BoolVar(&d.offline, "offline", d.env.hfOffline, "never download: hub datasets and requirements.txt / environment.yml come from the cache, or the command fails naming what is missing (default $HF_HUB_OFFLINE)")
	fs.StringVar(&d.cacheDir, "cache-dir", d.env.cacheRoot, "cache of downloaded datasets (DIR/hub) and requirements files (DIR/http)")
}
