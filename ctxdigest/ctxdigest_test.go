package ctxdigest

import (
	"context"
	"testing"

	"github.com/moby/buildkit/client/llb"
)

func TestOf(t *testing.T) {
	ctx := context.Background()
	if _, ok := Of(ctx, llb.Scratch()); ok {
		t.Error("state without a fingerprint: ok")
	}
	if _, ok := Of(ctx, With(llb.Scratch(), "")); ok {
		t.Error("empty fingerprint: ok")
	}
	st := With(llb.Scratch(), "abc")
	if d, ok := Of(ctx, st); !ok || d != "abc" {
		t.Errorf("got %q, %t", d, ok)
	}
	// The value survives the operations the builder applies after it.
	if d, ok := Of(ctx, st.AddEnv("K", "v").Dir("/w")); !ok || d != "abc" {
		t.Errorf("after AddEnv and Dir: got %q, %t", d, ok)
	}
}
