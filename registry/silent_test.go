package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/retry"
)

// A registry that accepts connections and never answers: an attempt waits
// Budget.AnswerTimeout for an answer, the request gives up within the
// budget's total time, and the host is then marked down: the next request
// fails at once. (Before, each request waited 2 min for headers and the host
// was never marked down.)
func TestSilentRegistryIsMarkedDownWithinTheBudget(t *testing.T) {
	host := faultproxy.Silent(t)
	b := retry.Budget{Attempts: 8, MaxElapsed: 3 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, AnswerTimeout: 400 * time.Millisecond}
	c := newTestClient(t, b)
	ref, _ := c.ParseReference(host + "/x/y:latest")
	start := time.Now()
	_, err := c.Head(context.Background(), ref)
	el := time.Since(start)
	var gu *GaveUpError
	var na *NoAnswerError
	if !errors.As(err, &gu) || !errors.As(err, &na) {
		t.Fatalf("Head on a silent registry: %v", err)
	}
	if el > b.MaxElapsed+b.AnswerTimeout+time.Second {
		t.Errorf("gave up after %v; the budget is %v", el, b.MaxElapsed)
	}
	start = time.Now()
	_, err = c.Head(context.Background(), ref)
	var un *UnreachableError
	if !errors.As(err, &un) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("second request: %v after %v, want an immediate UnreachableError", err, time.Since(start))
	}
}
