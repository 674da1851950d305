package ci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/registry"
)

// The nightly's ledgers are kept in the target repository itself, as OCI
// artifacts under fixed tags (issue 20 row 14): an Actions cache entry is
// evicted after 7 days unused, and a night that finds none rebuilds and
// re-verifies everything. The registry keeps them as long as the images.
const (
	// LedgerTag and EnvLedgerTag are the tags the publish ledger and the
	// env ledger are kept under.
	LedgerTag    = "swebuild-ledger"
	EnvLedgerTag = "swebuild-envs-ledger"
	// LedgerMediaType is the artifact's one layer: the JSON-lines file.
	LedgerMediaType types.MediaType = "application/vnd.swebuild.ledger.v1+jsonl"
	// ledgerConfigType is the artifact's config (an empty JSON object).
	ledgerConfigType types.MediaType = "application/vnd.swebuild.ledger.config.v1+json"
	// maxLedgerBytes bounds a pulled ledger.
	maxLedgerBytes = 1 << 30
)

// PushLedger uploads the file at path as an artifact tagged tag in repo
// and returns the artifact's digest.
func PushLedger(ctx context.Context, c *registry.Client, repo, tag, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("pushing ledger: %w", err)
	}
	r, err := c.ParseRepository(repo)
	if err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	layer := static.NewLayer(data, LedgerMediaType)
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, ledgerConfigType), types.OCIManifestSchema1), layer)
	if err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	cfg, err := partial.ConfigLayer(img)
	if err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	if err := c.Upload(ctx, r, cfg); err != nil {
		return "", fmt.Errorf("pushing ledger %s: config: %w", path, err)
	}
	if err := c.Upload(ctx, r, layer); err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	if err := c.Put(ctx, r.Tag(tag), img); err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("pushing ledger %s: %w", path, err)
	}
	return d.String(), nil
}

// PullLedger writes the ledger artifact tagged tag in repo to path
// (replacing it) and reports whether there was one. No artifact under the
// tag is (false, nil): the caller says what that costs.
func PullLedger(ctx context.Context, c *registry.Client, repo, tag, path string) (bool, error) {
	r, err := c.ParseRepository(repo)
	if err != nil {
		return false, fmt.Errorf("pulling ledger: %w", err)
	}
	ref := r.Tag(tag)
	d, err := c.Head(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	if d == nil {
		return false, nil
	}
	img, err := c.Image(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	if len(layers) != 1 {
		return false, fmt.Errorf("pulling ledger %s: %d layers, want the one %s layer a ledger artifact has", ref, len(layers), LedgerMediaType)
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != LedgerMediaType {
		return false, fmt.Errorf("pulling ledger %s: layer media type %q, want %s (%v)", ref, mt, LedgerMediaType, err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	err = core.WriteAtomic(path, 0o644, func(w io.Writer) error {
		n, err := io.Copy(w, io.LimitReader(rc, maxLedgerBytes+1))
		if err == nil && n > maxLedgerBytes {
			err = errors.New("larger than the 1 GiB limit of a ledger")
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pulling ledger %s: %w", ref, err)
	}
	return true, nil
}
