package check

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/swebuild/swebuild/sign"
)

// CatalogBundle is where a digest catalog FILE's signature is written: a
// Sigstore bundle, as cosign sign-blob --bundle names it
// (FILE.sigstore.json).
func CatalogBundle(file string) string { return file + ".sigstore.json" }

// WriteCatalogFile writes the report's digest catalog (WriteDigests) to
// path and, with a signer, its signed statement (Catalog) beside it
// (CatalogBundle), saying so to w. dataset names the input the report
// checked.
func (r *Report) WriteCatalogFile(ctx context.Context, path string, signer *sign.Signer, dataset string, o Options, w io.Writer) error {
	var buf bytes.Buffer
	if err := r.WriteDigests(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if signer == nil {
		return nil
	}
	st, err := r.Catalog(filepath.Base(path), buf.Bytes(), dataset, o)
	if err != nil {
		return err
	}
	bundle, _, err := signer.Sign(ctx, st)
	if err != nil {
		return fmt.Errorf("signing the catalog: %w", err)
	}
	if err := os.WriteFile(CatalogBundle(path), bundle, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "digest catalog %s signed by %s: %s\n", path, signer.Name(), CatalogBundle(path))
	return nil
}

// VerifyCatalogFile verifies the digest catalog file with its bundle
// (CatalogBundle) and says to w what it lists.
func VerifyCatalogFile(t sign.Trust, file string, w io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	bundle, err := os.ReadFile(CatalogBundle(file))
	if err != nil {
		return fmt.Errorf("the catalog's signature: %w", err)
	}
	info, err := VerifyCatalog(t, data, bundle)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	verified := "not gated (written without --require-verified)"
	if info.Verified >= 0 {
		verified = fmt.Sprintf("%d verified images", info.Verified)
	}
	_, err = fmt.Fprintf(w, "%s: signed by %s: the digest catalog of %s in %s:%s, %d instances, %d/%d references present, %s\n",
		file, t.Name(), info.Dataset, info.Repo, info.Tag, info.Instances, info.Present, info.References, verified)
	return err
}
