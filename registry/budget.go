package registry

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/swebuild/swebuild/retry"
)

// Every registry request swebuild makes has one retry budget (a
// retry.Budget: attempts, time for an answer, total time, statuses,
// Retry-After), applied in exactly one place, the client's transport (see
// retryTransport); go-containerregistry's own retries are switched off and
// nothing above the transport retries again. The rules (which answers are
// retried, the backoff with full jitter, Retry-After on 429 and 503) are
// package retry's.
//
// An attempt waits at most the budget's AnswerTimeout to connect and send
// its headers, and again for the registry's answer (its status line and
// headers) once the request is sent, neither wait past the request's
// MaxElapsed; a blob upload's PATCH and commit (PUT ...?digest=, which the
// registry answers after storing or checking the data) wait at most
// Options.CommitAnswerTimeout for their answer. A host that never answered
// any attempt of a whole request (connections refused, or accepted and
// left silent) is marked down: requests to it fail at once for MaxElapsed.
//
// A request whose body cannot be re-read (no GetBody) gets one attempt. A
// blob upload PATCH is retried on a fresh upload session with its body
// fetched again from GetBody (for a layer copied from another registry, a
// new GET of the blob): bodies are streamed, never buffered for replay.

// DefaultBudget is the budget of `swebuild publish` and every other command
// talking to registries: 8 attempts within 60 s. A registry that refuses
// connections fails a request after 7 waits of at most 0.5 + 1 + 2 + 2 + 2
// + 2 + 2 s (MaxWaits: 11.5 s); one that accepts connections and never
// answers, after 3 attempts of at most 20 s, the last one cut at the 60 s
// of MaxElapsed. With 20% of
// requests failing at random, a request fails all 8 attempts once in about
// 400,000 (0.2^8).
var DefaultBudget = retry.Budget{
	Attempts:      8,
	MaxElapsed:    60 * time.Second,
	MinBackoff:    250 * time.Millisecond,
	MaxBackoff:    2 * time.Second,
	MaxRetryAfter: 30 * time.Second,
	AnswerTimeout: 20 * time.Second,
	Statuses:      retry.Statuses,
}

// DefaultCommitAnswerTimeout is how long a blob upload's PATCH or commit
// waits for the registry's answer when Options.CommitAnswerTimeout is zero
// (at least the budget's AnswerTimeout).
const DefaultCommitAnswerTimeout = 2 * time.Minute

// retryError reports whether a transport error is worth another attempt:
// retry.Error's, and never a refused plain-HTTP connection (InsecureError).
func retryError(ctx context.Context, err error) bool {
	var insc *InsecureError
	return !errors.As(err, &insc) && retry.Error(ctx, err)
}

// dialError reports whether err is a failure to connect at all (as opposed
// to a connection that broke): what a dead registry gives.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
