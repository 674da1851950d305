package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/solver/pb"

	"github.com/swebuild/swebuild/core"
)

// CacheKeyInputs are everything a gold verification of a built image depends
// on. Two verifications with equal inputs run the same eval.sh with the same
// patch on the same image, so the second can reuse the first's result.
type CacheKeyInputs struct {
	// Definition is the digest of the image's marshaled LLB definition
	// (DefinitionDigest): equal definitions build the same image.
	Definition string
	// ContextFiles fingerprints the on-disk files the definition's local
	// sources read (the LLB names a local source, not its content).
	ContextFiles string
	InstanceID   string
	Platform     core.Platform
	Patch        string
	EvalScript   string
	Parser       string
	// Rules are the grading rules (v5, v4.1).
	Rules   string
	Timeout time.Duration
	Mode    string
}

// Key is the hex sha256 of the inputs, each field length-prefixed so that no
// two different inputs encode alike.
func (in CacheKeyInputs) Key() string {
	h := sha256.New()
	h.Write([]byte("swebuild verify cache v2\n"))
	for _, f := range []string{in.Definition, in.ContextFiles, in.InstanceID, in.Platform.String(), in.Patch, in.EvalScript, in.Parser, in.Rules, strconv.FormatInt(int64(in.Timeout), 10), in.Mode} {
		fmt.Fprintf(h, "%d:", len(f))
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DefinitionDigest marshals image for platform and returns the sha256 of its
// definition's ops, in the order Marshal writes them (a deterministic walk of
// the graph; op metadata such as progress names is left out), with the
// random per-client ids of local sources (local.unique, local.session)
// removed and input digests rewritten to match. Equal digests mean the same
// build steps on the same sources; what a local source holds is not in its
// LLB at all and must be keyed separately (CacheKeyInputs.ContextFiles).
func DefinitionDigest(ctx context.Context, image llb.State, platform core.Platform) (string, error) {
	d, _, err := definitionDigest(ctx, image, platform)
	return d, err
}

// definitionDigest is DefinitionDigest and whether the definition has a
// local source (whose content its LLB does not name).
func definitionDigest(ctx context.Context, image llb.State, platform core.Platform) (string, bool, error) {
	if platform.IsZero() {
		return "", false, errors.New("no platform (want linux/amd64 or linux/arm64)")
	}
	def, err := image.Marshal(ctx, llb.Platform(platform.OCI()))
	if err != nil {
		return "", false, fmt.Errorf("marshaling the image definition: %w", err)
	}
	h := sha256.New()
	locals := false
	// Marshal writes an op after its inputs, so each input's digest is
	// already mapped to its canonical one when the op that uses it comes.
	canonical := map[string]string{}
	for _, b := range def.Def {
		sum := sha256.Sum256(b)
		old := "sha256:" + hex.EncodeToString(sum[:])
		var op pb.Op
		if err := op.UnmarshalVT(b); err != nil {
			return "", false, fmt.Errorf("decoding the image definition: %w", err)
		}
		for _, in := range op.Inputs {
			if d, ok := canonical[in.Digest]; ok {
				in.Digest = d
			}
		}
		if src := op.GetSource(); src != nil && strings.HasPrefix(src.Identifier, "local://") {
			locals = true
			// Per client process random ids: which transfer to reuse,
			// not what is in it (the content is fingerprinted apart).
			delete(src.Attrs, pb.AttrLocalUniqueID)
			delete(src.Attrs, pb.AttrLocalSessionID)
		}
		nb, err := op.Marshal()
		if err != nil {
			return "", false, fmt.Errorf("encoding the image definition: %w", err)
		}
		nsum := sha256.Sum256(nb)
		canonical[old] = "sha256:" + hex.EncodeToString(nsum[:])
		fmt.Fprintf(h, "%d:", len(nb))
		h.Write(nb)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), locals, nil
}

// CacheRecord is one cached successful verification.
type CacheRecord struct {
	Key        string        `json:"key"`
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	Mode       string        `json:"mode"`
	Resolved   bool          `json:"resolved"`
	F2P        Counts        `json:"fail_to_pass"`
	P2P        Counts        `json:"pass_to_pass"`
	// Seconds and TestSeconds are the original run's.
	Seconds     float64 `json:"seconds"`
	TestSeconds float64 `json:"test_seconds"`
	// Dir is where the original run's logs were written; Report is its
	// report.json.
	Dir      string          `json:"dir"`
	Report   json.RawMessage `json:"report,omitempty"`
	Verified time.Time       `json:"verified"`
}

// Cache stores successful verifications under Dir/<key>.json.
type Cache struct {
	Dir string
}

func (c *Cache) path(key string) string { return filepath.Join(c.Dir, key+".json") }

// Load returns the record stored under key. A missing, unreadable or corrupt
// record, or one stored under another key, is a miss (err says why, for a
// warning; nil for a plain miss).
func (c *Cache) Load(key string) (*CacheRecord, error) {
	b, err := os.ReadFile(c.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading verification cache: %w", err)
	}
	var rec CacheRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("verification cache %s is corrupt (ignored): %w", c.path(key), err)
	}
	if rec.Key != key || !rec.Resolved {
		return nil, fmt.Errorf("verification cache %s does not hold a resolved result for its key (ignored)", c.path(key))
	}
	return &rec, nil
}

// Store writes rec under rec.Key atomically (temporary file, then rename).
func (c *Cache) Store(rec *CacheRecord) error {
	if rec.Key == "" {
		return errors.New("writing verification cache: record has no key")
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding verification cache record: %w", err)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("writing verification cache: %w", err)
	}
	if err := core.WriteBytesAtomic(c.path(rec.Key), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("verification cache: %w", err)
	}
	return nil
}
