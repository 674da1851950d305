// Package ctxdigest carries the fingerprint of an image's on-disk build
// context files (rootfs tarballs, mounted directories, a task directory)
// on its LLB state, from the builder that computed it to the stages that
// key a cache on the state (verify's cache of gold checks). A local
// source's LLB names only the directory, not its content, so a cache keyed
// on the LLB definition alone must add this. The package is BuildKit's
// client/llb and nothing else: a stage asks for the digest without linking
// the builder.
package ctxdigest

import (
	"context"

	"github.com/moby/buildkit/client/llb"
)

// key is the llb.State value key of the fingerprint.
type key struct{}

// With returns st carrying digest, the fingerprint of the context files of
// every node the image state was built from.
func With(st llb.State, digest string) llb.State {
	return st.WithValue(key{}, digest)
}

// Of returns the fingerprint st carries; ok is false when it carries none.
func Of(ctx context.Context, st llb.State) (digest string, ok bool) {
	v, err := st.Value(ctx, key{})
	if err != nil {
		return "", false
	}
	s, ok := v.(string)
	return s, ok && s != ""
}
