package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/containerd/platforms"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/solver/pb"
	"golang.org/x/sync/errgroup"
)

// BuildKitEngine runs jobs as BuildKit solves: an exec on the instance image
// with no network, the wrapper's inputs as a read-only mount of in-memory
// files, a scratch output mount read back through the gateway, and the exec
// never cached (llb.IgnoreCache plus the job's nonce). Nothing is exported.
type BuildKitEngine struct {
	Client *bkclient.Client
}

// Run pulls job.Image (resolving its config for ENV, WORKDIR and USER) and
// runs the job on it.
func (e *BuildKitEngine) Run(ctx context.Context, job Job) (*RunOutput, error) {
	if job.Image == "" {
		return nil, errors.New("running verification: no image reference")
	}
	p, err := platforms.Parse(job.Platform)
	if err != nil {
		return nil, fmt.Errorf("running verification: platform %q: %w", job.Platform, err)
	}
	p = platforms.Normalize(p)
	var out *RunOutput
	start := time.Now()
	_, err = e.Client.Build(ctx, bkclient.SolveOpt{}, "swebuild-verify", func(ctx context.Context, gc gateway.Client) (*gateway.Result, error) {
		img := llb.Image(job.Image, llb.Platform(p), llb.WithMetaResolver(gc), llb.WithCustomName("[verify] "+job.Image))
		o, err := RunInGateway(ctx, gc, img, job)
		if err != nil {
			return nil, err
		}
		out = o
		return gateway.NewResult(), nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("running verification of %s (%s): %w", job.Image, job.Platform, err)
	}
	out.Wall = time.Since(start)
	return out, nil
}

// RunInGateway runs job on image inside an existing gateway build session:
// what BuildKitEngine does after resolving the image, and what the builder's
// verify hook calls with the instance image it has just solved (image must
// then carry the image config, e.g. llb.State.WithImageConfig). Wall is the
// time of this call.
func RunInGateway(ctx context.Context, gc gateway.Client, image llb.State, job Job) (*RunOutput, error) {
	start := time.Now()
	p, err := platforms.Parse(job.Platform)
	if err != nil {
		return nil, fmt.Errorf("running verification: platform %q: %w", job.Platform, err)
	}
	p = platforms.Normalize(p)
	files := inputFiles(job)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	// One file op making every input file: one snapshot, not one per file.
	var fa *llb.FileAction
	created := llb.WithCreatedTime(time.Unix(0, 0).UTC())
	for _, n := range names {
		mode := os.FileMode(0o644)
		if n == fileRun {
			mode = 0o755
		}
		if fa == nil {
			fa = llb.Mkfile("/"+n, mode, []byte(files[n]), created)
		} else {
			fa = fa.Mkfile("/"+n, mode, []byte(files[n]), created)
		}
	}
	in := llb.Scratch().File(fa, llb.WithCustomName("[verify] inputs"))
	run := image.Network(pb.NetMode_NONE).AddEnv("SWEBUILD_VERIFY_NONCE", job.Nonce).Run(
		llb.Args([]string{"/bin/bash", inDir + "/" + fileRun}),
		llb.AddMount(inDir, in, llb.Readonly),
		llb.IgnoreCache,
		llb.WithCustomName("[verify] apply patch and run eval.sh"),
	)
	outState := run.AddMount(outDir, llb.Scratch())
	def, err := outState.Marshal(ctx, llb.Platform(p))
	if err != nil {
		return nil, fmt.Errorf("running verification: marshaling the run: %w", err)
	}
	res, err := gc.Solve(ctx, gateway.SolveRequest{Definition: def.ToPB(), Evaluate: true})
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	ref, err := res.SingleRef()
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	entries, err := ref.ReadDir(ctx, gateway.ReadDirRequest{Path: "/"})
	if err != nil {
		return nil, fmt.Errorf("running verification: listing outputs: %w", err)
	}
	// The outputs are read concurrently: each read is a round trip to the
	// daemon.
	outFiles := map[string]string{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, st := range entries {
		if st.IsDir() {
			continue
		}
		name := st.Path
		g.Go(func() error {
			b, err := ref.ReadFile(gctx, gateway.ReadRequest{Filename: "/" + name})
			if err != nil {
				return fmt.Errorf("running verification: reading %s: %w", name, err)
			}
			mu.Lock()
			outFiles[name] = string(b)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out, err := parseOutputs(job, outFiles)
	if err != nil {
		return nil, fmt.Errorf("running verification: %w", err)
	}
	out.Wall = time.Since(start)
	return out, nil
}
