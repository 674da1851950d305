package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/sign"
)

// The consumer's gate (check --require-verified)
//
// Presence is not enough: the registry holds what anybody with push rights
// put there. With Options.Require, every per-arch image found (by its
// per-arch name, and the same digest in the index repository, where a
// consumer of the multi-arch name asks for referrers) must carry a
// verification statement signed by the trusted key or identity
// (sign.Trust.VerifyImage: the bundle's signature, and the statement's
// subject naming that digest), and the statement must say what verified
// means here (Verdict): result PASSED, the gold patch resolved in every one
// of its K runs, the no-patch control run and unresolved, the containers'
// network none. Every image that is not so is named, with why.

// Requirement is what check --require-verified asks of every image.
type Requirement struct {
	// Trust is whose signature counts (a public key, or a certificate
	// identity with a trusted root).
	Trust sign.Trust
}

// Receipt is what the gate found for one per-arch image in one
// repository.
type Receipt struct {
	InstanceID string        `json:"instance_id"`
	Platform   core.Platform `json:"platform"`
	// Image is REPO@sha256:... as verified.
	Image string `json:"image"`
	// Result is the statement's result (PASSED, WARNED, FAILED) and Runs
	// the gold runs it counts; empty when no signed statement verified.
	Result string `json:"result,omitempty"`
	Runs   int    `json:"gold_runs,omitempty"`
	// Problem says why the image is refused; "" when it passed.
	Problem string `json:"problem,omitempty"`
}

// OK reports whether the image passed the gate.
func (r Receipt) OK() bool { return r.Problem == "" }

// Verdict checks a verified statement against the gate: nil when it says
// PASSED with the gold resolved in every run, the control unresolved and
// the network none; else every reason it does not (attest.TestResult's
// Problems: the one rule, which the index's verification summary uses
// too).
func Verdict(tr *attest.TestResult) []string { return tr.Problems() }

func number(v any) (int, bool) {
	f, ok := v.(float64)
	return int(f), ok
}

// receipts verifies every present per-arch image of the report in its
// per-arch repository and in the index repository (where the index lists
// it), o.Reader.Jobs at a time.
func (r *Report) receipts(ctx context.Context, o Options) error {
	type job struct {
		ref  Ref
		repo string
	}
	namer := manifests.Namer{Repo: o.Repo, KeepDoubleUnderscore: o.KeepDoubleUnderscore}
	var jobs []job
	indexed := map[string]bool{}
	for _, ref := range r.Refs {
		if ref.Kind == KindIndex && ref.OK() {
			indexed[ref.InstanceID] = true
		}
	}
	for _, ref := range r.Refs {
		if ref.Kind != KindArch || !ref.Present || ref.Digest == "" {
			continue
		}
		jobs = append(jobs, job{ref, repoOf(ref.Name)})
		if indexed[ref.InstanceID] {
			jobs = append(jobs, job{ref, namer.IndexRepo(ref.InstanceID)})
		}
	}
	out := make([]Receipt, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Reader.Jobs, 1))
	for i, j := range jobs {
		g.Go(func() error {
			rc, err := verifyOne(gctx, o, j.ref, j.repo)
			out[i] = rc
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	r.Receipts = out
	r.Trusted = o.Require.Trust.Name()
	return nil
}

// verifyOne checks one image in repo. Refusals are the receipt's problem;
// the error is for what could not be asked (after the client's retries).
func verifyOne(ctx context.Context, o Options, ref Ref, repoName string) (Receipt, error) {
	repo, err := name.NewRepository(repoName, name.WeakValidation)
	if err != nil {
		return Receipt{}, fmt.Errorf("%s: %w", repoName, err)
	}
	rc := Receipt{InstanceID: ref.InstanceID, Platform: ref.Platform, Image: repo.Digest(ref.Digest).String()}
	h, err := v1.NewHash(ref.Digest)
	if err != nil {
		rc.Problem = fmt.Sprintf("digest %q: %v", ref.Digest, err)
		return rc, nil
	}
	res, err := o.Require.Trust.VerifyImage(ctx, o.Reader, repo, h, attest.TestResultPredicate)
	var ie *sign.ImageError
	switch {
	case errors.As(err, &ie):
		rc.Problem = ie.Reason
		if len(ie.Rejected) > 0 {
			var rs []string
			for _, rj := range ie.Rejected {
				rs = append(rs, rj.Reason)
			}
			rc.Problem += " (" + strings.Join(rs, "; ") + ")"
		}
		return rc, nil
	case err != nil:
		return rc, err
	}
	for _, v := range res.Of(attest.TestResultPredicate) {
		tr, err := attest.ParseVerificationStatement(v.Statement)
		if err != nil {
			rc.Problem = "the signed statement: " + err.Error()
			return rc, nil
		}
		rc.Result = tr.Result
		rc.Runs, _ = number(tr.Extra["goldRuns"])
		if rc.Runs == 0 {
			rc.Runs, _ = number(tr.Extra["repeat"])
		}
		if why := Verdict(tr); len(why) > 0 {
			// Every signed statement of the image must pass: an older
			// one left beside a newer could say otherwise.
			rc.Problem = "signed statement: " + strings.Join(why, "; ")
			return rc, nil
		}
	}
	return rc, nil
}

// printReceipts writes the gate's line and one line per refused image.
func (r *Report) printReceipts(w io.Writer) {
	ok := 0
	var bad []Receipt
	for _, rc := range r.Receipts {
		if rc.OK() {
			ok++
		} else {
			bad = append(bad, rc)
		}
	}
	fmt.Fprintf(w, "%d/%d images verified: a verification statement signed by %s, gold resolved in every run, the no-patch control failing, network none\n", ok, len(r.Receipts), r.Trusted)
	sort.SliceStable(bad, func(i, j int) bool { return bad[i].Image < bad[j].Image })
	if len(bad) > 0 {
		fmt.Fprintf(w, "not verified (%d):\n", len(bad))
	}
	for _, rc := range bad {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", rc.InstanceID, rc.Image, rc.Problem)
	}
}

// unverified counts the refused images.
func (r *Report) unverified() int {
	n := 0
	for _, rc := range r.Receipts {
		if !rc.OK() {
			n++
		}
	}
	return n
}

// CatalogPredicate is the predicate type of a digest catalog's statement
// (check --digests FILE signs FILE so): the statement's subject is the
// file (its name and sha256), the predicate says what it catalogs.
const CatalogPredicate = "https://github.com/swebuild/swebuild/digest-catalog/v1"

// CatalogInfo is the predicate of a digest catalog's statement: which
// dataset revision, publication and tag it lists, and how complete the
// check found it.
type CatalogInfo struct {
	// Dataset is the dataset and its revision (NAME@REVISION:SPLIT, or
	// the file or task repo read).
	Dataset   string   `json:"dataset"`
	Repo      string   `json:"repo"`
	Tag       string   `json:"tag"`
	Platforms []string `json:"platforms,omitempty"`
	Instances int      `json:"instances"`
	// Present and References count the references found of those
	// checked; Verified counts the images the gate passed (with
	// --require-verified; -1 when it did not run).
	Present    int `json:"present"`
	References int `json:"references"`
	Verified   int `json:"verified"`
}

// Catalog returns the statement of a digest catalog (the bytes of the
// --digests file, named name) as check found the publication.
func (r *Report) Catalog(name string, file []byte, dataset string, o Options) ([]byte, error) {
	ok, total := r.Counts()
	info := CatalogInfo{Dataset: dataset, Repo: o.Repo, Tag: o.Tag, Instances: r.Instances, Present: ok, References: total, Verified: -1}
	if info.Tag == "" {
		info.Tag = DefaultTag
	}
	for _, p := range r.Platforms {
		info.Platforms = append(info.Platforms, p.String())
	}
	if r.Trusted != "" {
		info.Verified = len(r.Receipts) - r.unverified()
	}
	pred, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("digest catalog statement: %w", err)
	}
	sum := sha256.Sum256(file)
	return sign.Statement(name, hex.EncodeToString(sum[:]), CatalogPredicate, pred)
}

// VerifyCatalog verifies bundle (a Sigstore bundle, FILE.sigstore.json) of
// the digest catalog file with trust: the signature, the statement's
// subject naming the file's sha256 and its predicate type. It returns what
// the statement says of the catalog.
func VerifyCatalog(trust sign.Trust, file, bundle []byte) (*CatalogInfo, error) {
	sum := sha256.Sum256(file)
	h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if info, err := sign.BundleSubjects(bundle); err == nil && !info.Names(h.Hex) && len(info.Subjects) > 0 {
		return nil, fmt.Errorf("the file is not the one signed: its sha256 is %s, the signed statement names %s (%s): it changed after it was signed", h.Hex, info.Subjects[0].SHA256, info.Subjects[0].Name)
	}
	v, err := trust.VerifyBundle(bundle, h)
	if err != nil {
		return nil, err
	}
	if v.PredicateType != CatalogPredicate {
		return nil, fmt.Errorf("the signed statement is a %s, not a digest catalog (%s)", v.PredicateType, CatalogPredicate)
	}
	var st struct {
		Predicate CatalogInfo `json:"predicate"`
	}
	if err := json.Unmarshal(v.Statement, &st); err != nil {
		return nil, fmt.Errorf("the digest catalog's statement: %w", err)
	}
	return &st.Predicate, nil
}
