package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/retry"
)

// A registry that accepts connections and never answers: each attempt
// waits at most Budget.AnswerTimeout for an answer and never past the
// request's budget (MaxElapsed), so the request gives up with the budget's
// own error before a context with a deadline a second after the budget's
// end is done; the host is then marked down and the next request fails at
// once, without a connection. Before, the last attempt started within the
// budget waited its whole AnswerTimeout past it (the silent ping took 65 s
// against 60 s): here the context's deadline came first.
func TestSilentRegistryIsMarkedDownWithinTheBudget(t *testing.T) {
	host := faultproxy.Silent(t)
	b := retry.Budget{Attempts: 8, MaxElapsed: 4 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, AnswerTimeout: 3 * time.Second}
	c := newTestClient(t, b)
	ref, _ := c.ParseReference(host + "/x/y:latest")
	ctx, cancel := context.WithTimeout(context.Background(), b.MaxElapsed+time.Second)
	defer cancel()
	_, err := c.Head(ctx, ref)
	var gu *GaveUpError
	var na *NoAnswerError
	if !errors.As(err, &gu) || !errors.As(err, &na) {
		t.Fatalf("Head on a silent registry: %v; want the budget's GaveUpError (NoAnswerError) before the context's deadline, a second after the budget's end", err)
	}
	_, err = c.Head(context.Background(), ref)
	var un *UnreachableError
	if !errors.As(err, &un) {
		t.Errorf("second request: %v, want an UnreachableError (the host marked down)", err)
	}
}
