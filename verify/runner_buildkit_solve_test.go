package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/client/llb"
	gateway "github.com/moby/buildkit/frontend/gateway/client"

	"github.com/swebuild/swebuild/core"
)

// solveClient is a gateway client whose Solve is solve; any other method
// the runner called would panic on the nil interface.
type solveClient struct {
	gateway.Client
	solve func(ctx context.Context) error
}

func (c solveClient) Solve(ctx context.Context, _ gateway.SolveRequest) (*gateway.Result, error) {
	return nil, c.solve(ctx)
}

// TestPrepareSolveErrors: a prepare solve that fails says why; only one
// that outlived Job.PrepareTimeout says the limit ran out. (A full disk in
// CI was reported as "ran longer than 30m0s" after 1.45 s.)
func TestPrepareSolveErrors(t *testing.T) {
	tests := []struct {
		name    string
		solve   func(ctx context.Context) error
		want    string
		notWant string
	}{
		{
			name:    "fails at once",
			solve:   func(context.Context) error { return errors.New("mkdir /var/lib/buildkit/x: no space left on device") },
			want:    "running verification: mkdir /var/lib/buildkit/x: no space left on device",
			notWant: "ran longer",
		},
		{
			name: "outlives the limit",
			solve: func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			},
			want: "the prepare container (leak check, patch, diff) ran longer than 50ms",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := Job{Image: "example/img", Platform: core.AMD64, PrepareTimeout: 50 * time.Millisecond}
			_, err := RunInGateway(context.Background(), solveClient{solve: tc.solve}, llb.Image("example/img"), job, NewInputFS())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Fatalf("error %v says %q", err, tc.notWant)
			}
		})
	}
}
