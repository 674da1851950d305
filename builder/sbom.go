package builder

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/solver/pb"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/sbom"
)

// The resolved environment (SBOM)
//
// After an env or instance node whose graph.Node.Inventory names listing commands
// is solved, and inside the same gateway build (as the verify hook), the
// commands run once in one exec on the solved image: its file system and
// config (ENV, WORKDIR), no network, each command's standard output, error
// and exit code written to a scratch mount that is read back; the image
// itself is not changed (the exec's result is not exported). The exec is
// content-addressed like any step: a rebuild of the same image is a cache
// hit and reads the same listing. The outputs are parsed (package sbom)
// into an sbom.Document whose subject is the image manifest BuildKit then
// exports, kept in Outcome.SBOM and written to RunDir/sbom/; when the image
// is pushed, the document is attached to it in the push repository as an
// OCI 1.1 artifact (artifactType sbom.MediaType, subject the image
// manifest) through attest.Referrers, and the record names the artifact
// (core.Image.SBOM) for publish to carry.
//
// A listing that fails (a non-zero exit, an output that does not parse)
// does not fail the node: the image is exported and pushed without an SBOM,
// Outcome.SBOMError names the command with the tail of its output, the
// summary lists it and Build returns an error (a user keeps the image and
// gets a loud error).

// sbomMount is where the listing exec writes its outputs.
const sbomMount = "/.swebuild-sbom"

// capture is the state of one node's SBOM capture.
type capture struct {
	listings []sbom.Listing
	err      error
	elapsed  time.Duration
}

func (cb *chainBuild) captures() bool {
	n := cb.node()
	return n.Inventory != nil && len(n.Inventory.Commands) > 0 && (n.Kind == graph.KindEnv || n.Kind == graph.KindInstance)
}

// listingScript runs every command in a subshell of its own, each with its
// output, error and exit code in files NAME.out, NAME.err, NAME.rc.
func listingScript(cmds []graph.ListingCommand) string {
	var b strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&b, "( %s ) </dev/null >%s/%d.out 2>%s/%d.err; echo $? >%s/%d.rc\n", c.Run, sbomMount, i, sbomMount, i, sbomMount, i)
	}
	return b.String()
}

// capture runs the node's listing commands on its solved image and reads
// their outputs; any failure is kept in cb.sbom.err.
func (cb *chainBuild) capture(ctx context.Context, gc gateway.Client) {
	start := time.Now()
	cb.sbom = &capture{}
	cb.sbom.listings, cb.sbom.err = cb.runListings(ctx, gc)
	cb.sbom.elapsed = time.Since(start)
	if cb.sbom.err != nil {
		fmt.Fprintf(cb.job.Log, "SBOM capture of %s failed (the image is kept): %v\n", cb.node().ID(), cb.sbom.err)
		return
	}
	fmt.Fprintf(cb.job.Log, "SBOM of %s: %d listing(s) captured in %.2fs\n", cb.node().ID(), len(cb.sbom.listings), cb.sbom.elapsed.Seconds())
}

func (cb *chainBuild) runListings(ctx context.Context, gc gateway.Client) ([]sbom.Listing, error) {
	n := cb.node()
	sv := cb.done[n.Key]
	if sv.ref == nil {
		return nil, fmt.Errorf("the image has no file system to list packages in")
	}
	st, err := sv.ref.ToState()
	if err != nil {
		return nil, fmt.Errorf("listing packages: %w", err)
	}
	if sv.config != nil {
		if st, err = st.WithImageConfig(sv.config); err != nil {
			return nil, fmt.Errorf("listing packages: reading the image config: %w", err)
		}
	}
	cmds := n.Inventory.Commands
	run := st.Network(pb.NetMode_NONE).Run(
		llb.Args([]string{"/bin/bash", "-c", listingScript(cmds)}),
		llb.WithCustomName("[internal] swebuild sbom: list packages of "+n.Key),
	)
	out := run.AddMount(sbomMount, llb.Scratch())
	def, err := out.Marshal(ctx, llb.Platform(n.Platform.OCI()))
	if err != nil {
		return nil, fmt.Errorf("listing packages: marshaling the exec: %w", err)
	}
	res, err := gc.Solve(ctx, gateway.SolveRequest{Definition: def.ToPB(), Evaluate: true})
	if err != nil {
		return nil, fmt.Errorf("running the listing commands (/bin/bash -c): %w", err)
	}
	ref, err := res.SingleRef()
	if err != nil {
		return nil, fmt.Errorf("listing packages: %w", err)
	}
	read := func(name string) ([]byte, error) {
		b, err := ref.ReadFile(ctx, gateway.ReadRequest{Filename: "/" + name})
		if err != nil {
			return nil, fmt.Errorf("reading %s of the listing: %w", name, err)
		}
		return b, nil
	}
	var ls []sbom.Listing
	for i, c := range cmds {
		rc, err := read(strconv.Itoa(i) + ".rc")
		if err != nil {
			return nil, err
		}
		stdout, err := read(strconv.Itoa(i) + ".out")
		if err != nil {
			return nil, err
		}
		if code := strings.TrimSpace(string(rc)); code != "0" {
			stderr, _ := read(strconv.Itoa(i) + ".err")
			return nil, fmt.Errorf("listing command %q exited with %s; its output ends:\n%s", c.Run, code, lastLines(append(stdout, stderr...), 15))
		}
		l := sbom.Listing{Format: c.Format, Command: c.Run, Output: stdout}
		if _, err := l.Packages(); err != nil {
			return nil, fmt.Errorf("%w; the output ends:\n%s", err, lastLines(stdout, 15))
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// lastLines is the last n lines of b, indented.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// document makes the node's SBOM of the exported image subject.
func (cb *chainBuild) document(subject string) (*sbom.Document, error) {
	n := cb.node()
	inv := n.Inventory
	d := &sbom.Document{
		Subject: subject, Kind: string(n.Kind), Image: strings.TrimSuffix(n.Key, ":latest"), Platform: n.Platform,
		Repo: inv.Repo, Version: inv.Version, InstanceIDs: append([]string(nil), inv.InstanceIDs...),
		SpecKey: n.SpecKey,
	}
	if d.SpecKey == "" {
		d.SpecKey = cb.s.specKeys[n.ID()]
	}
	for _, l := range cb.sbom.listings {
		ps, err := l.Packages()
		if err != nil {
			return nil, err
		}
		d.Packages = append(d.Packages, ps...)
	}
	sbom.Sort(d.Packages)
	return d, nil
}

// finishSBOM makes the document of the exported image, writes it to the
// run directory and attaches it to the pushed image. Failures go to
// out.SBOMError.
func (s *bkSolver) finishSBOM(ctx context.Context, cb *chainBuild, resp *bkclient.SolveResponse, out *Outcome, log io.Writer) {
	if cb.sbom == nil {
		return
	}
	out.SBOMSeconds = cb.sbom.elapsed.Seconds()
	fail := func(err error) {
		out.SBOMError = err.Error()
		fmt.Fprintf(log, "SBOM of %s: %v\n", cb.node().ID(), err)
	}
	if cb.sbom.err != nil {
		fail(cb.sbom.err)
		return
	}
	d, err := cb.document(out.Digest)
	if err != nil {
		fail(err)
		return
	}
	raw, err := d.CycloneDX()
	if err != nil {
		fail(err)
		return
	}
	out.SBOM = raw
	if s.sbomDir != "" {
		p := filepath.Join(s.sbomDir, strings.TrimSuffix(logName(cb.node()), ".log")+".cdx.json")
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			fail(fmt.Errorf("writing %s: %w", p, err))
			return
		}
		out.SBOMFile = p
	}
	if s.layout == nil && (s.push == "" || s.referrers == nil) {
		return
	}
	start := time.Now()
	subject, err := pushedSubject(resp, out)
	if err != nil {
		fail(err)
		return
	}
	a, err := attest.NewArtifact(subject, sbom.MediaType, sbom.MediaType, raw, map[string]string{"org.opencontainers.image.title": "sbom.cdx.json"})
	if err != nil {
		fail(err)
		return
	}
	var where []string
	if s.layout != nil {
		// A referrer in the layout: the layout's index.json names it
		// beside the image (ociLayout.add).
		if err := s.layout.putArtifact(ctx, a); err != nil {
			fail(fmt.Errorf("writing the SBOM into the layout: %w", err))
			return
		}
		where = append(where, "written into the OCI layout")
	}
	if s.push != "" && s.referrers != nil {
		repo, err := s.referrers.Client.ParseRepository(s.push)
		if err != nil {
			fail(fmt.Errorf("attaching the SBOM: %w", err))
			return
		}
		// A rebuild of the same image lists the same packages: the same
		// artifact, already attached (its write-once tag answers one HEAD).
		attached, err := s.referrers.AttachOnce(ctx, repo, a)
		if err != nil {
			fail(fmt.Errorf("attaching the SBOM: %w", err))
			return
		}
		if attached {
			where = append(where, "attached")
		} else {
			where = append(where, "found attached")
		}
	}
	out.SBOMArtifact, out.SBOMArtifactSize = a.Descriptor.Digest.String(), a.Descriptor.Size
	fmt.Fprintf(log, "SBOM of %s: %d packages, %d bytes, %s as %s in %.2fs\n", cb.node().ID(), len(d.Packages), len(raw), strings.Join(where, " and "), out.SBOMArtifact, time.Since(start).Seconds())
}

// pushedSubject is the descriptor of the pushed image manifest: the one
// resolveAttested found in the exported index, else the exported
// descriptor itself.
func pushedSubject(resp *bkclient.SolveResponse, out *Outcome) (v1.Descriptor, error) {
	if out.manifest != nil {
		return *out.manifest, nil
	}
	enc := resp.ExporterResponse[exptypes.ExporterImageDescriptorKey]
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || enc == "" {
		return v1.Descriptor{}, fmt.Errorf("attaching the SBOM: BuildKit reported no image descriptor")
	}
	var d v1.Descriptor
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&d); err != nil {
		return v1.Descriptor{}, fmt.Errorf("attaching the SBOM: decoding the exported descriptor: %w", err)
	}
	if d.Digest.String() != out.Digest {
		return v1.Descriptor{}, fmt.Errorf("attaching the SBOM: the exported descriptor names %s, not the image %s", d.Digest, out.Digest)
	}
	if d.MediaType == "" {
		d.MediaType = types.OCIManifestSchema1
	}
	return v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}, nil
}

// setupSBOM readies the solver for the nodes' SBOMs: their spec keys, the
// run directory's sbom/ and, when images are pushed, the registry client
// that attaches them.
func (s *bkSolver) setupSBOM(nodes []*graph.Node, given map[string]string, opts Options) error {
	want := false
	for _, n := range nodes {
		if n.Inventory != nil && len(n.Inventory.Commands) > 0 {
			want = true
			for i, c := range n.Inventory.Commands {
				if !slices.Contains(sbom.Formats(), c.Format) {
					return fmt.Errorf("node %s: inventory command %d: format %q is not one of %s", n.ID(), i, c.Format, strings.Join(sbom.Formats(), ", "))
				}
			}
		}
	}
	if !want {
		return nil
	}
	s.specKeys = inputKeys(nodes, given)
	s.sbomDir = filepath.Join(opts.RunDir, "sbom")
	if err := os.MkdirAll(s.sbomDir, 0o755); err != nil {
		return fmt.Errorf("creating the SBOM directory: %w", err)
	}
	return s.setupReferrers(opts, true)
}

// SBOMFailed counts the built nodes whose SBOM capture or attachment
// failed.
func (r *Report) SBOMFailed() int {
	n := 0
	for _, res := range r.Results {
		if res.Status == StatusDone && res.Outcome.SBOMError != "" {
			n++
		}
	}
	return n
}

// writeSBOMs adds the SBOM line to the summary (when any node has an
// inventory) and every capture or attachment failure.
func (r *Report) writeSBOMs(w io.Writer) error {
	var captured, attached, failed int
	var secs float64
	var errs []string
	for _, res := range r.sorted() {
		if res.Status != StatusDone || res.Node.Inventory == nil || len(res.Node.Inventory.Commands) == 0 {
			continue
		}
		secs += res.Outcome.SBOMSeconds
		switch {
		case res.Outcome.SBOMError != "":
			failed++
			errs = append(errs, fmt.Sprintf("SBOM of %s (image kept, no SBOM): %s", res.Node.ID(), res.Outcome.SBOMError))
		case res.Outcome.SBOM != nil:
			captured++
			if res.Outcome.SBOMArtifact != "" {
				attached++
			}
		}
	}
	if captured+failed == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "SBOMs: %d captured (%.1fs in all), %d attached, %d failed\n", captured, secs, attached, failed); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	for _, e := range errs {
		if _, err := fmt.Fprintln(w, e); err != nil {
			return fmt.Errorf("writing summary: %w", err)
		}
	}
	return nil
}
