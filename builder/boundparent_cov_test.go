package builder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// resolver is a gateway client that only resolves image configs: the one
// call boundParent makes (any other call panics on the nil interface).
type resolver struct {
	gateway.Client
	dgst   digest.Digest
	config []byte
	err    error
	asked  []string
}

func (r *resolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	r.asked = append(r.asked, ref)
	return ref, r.dgst, r.config, r.err
}

// TestBoundParent: a parent bound to a pushed image is that image pinned to
// the digest its reference resolves to now (a tag, or a digest the
// registry answers for), and its config, given to the frontend as the base
// image's, carries the reproducible build's variables in place of the
// image's own values of them.
func TestBoundParent(t *testing.T) {
	r := &Reproducible{SourceDateEpoch: 1704708000}
	if got, want := r.Time(), time.Date(2024, 1, 8, 10, 0, 0, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Time() = %v, want %v", got, want)
	}
	resolved := digest.Digest("sha256:" + strings.Repeat("ab", 32))
	cfg := []byte(`{"architecture":"arm64","os":"linux","config":{"Env":["PATH=/usr/bin:/bin","SOURCE_DATE_EPOCH=1","LANG=C.UTF-8"]}}`)
	arm := ocispecs.Platform{OS: "linux", Architecture: "arm64"}
	for _, c := range []struct{ ref, want string }{
		{"127.0.0.1:5000/swebuild/build:sweb.env.x", "docker-image://127.0.0.1:5000/swebuild/build:sweb.env.x@" + resolved.String()},
		{"127.0.0.1:5000/swebuild/build@sha256:" + strings.Repeat("cd", 32), "docker-image://127.0.0.1:5000/swebuild/build@" + resolved.String()},
	} {
		gc := &resolver{dgst: resolved, config: cfg}
		def, md, err := r.boundParent(context.Background(), gc, c.ref, arm)
		if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		if !slices.Equal(gc.asked, []string{c.ref}) {
			t.Errorf("%s: resolved %q", c.ref, gc.asked)
		}
		if !slices.ContainsFunc(def.Def, func(op []byte) bool { return bytes.Contains(op, []byte(c.want)) }) {
			t.Errorf("%s: no source op of %s in the definition", c.ref, c.want)
		}
		var meta map[string][]byte
		if err := json.Unmarshal([]byte(md), &meta); err != nil {
			t.Fatalf("%s: metadata %q: %v", c.ref, md, err)
		}
		var img ocispecs.Image
		if err := json.Unmarshal(meta[exptypes.ExporterImageConfigKey], &img); err != nil {
			t.Fatalf("%s: the image config in the metadata: %v", c.ref, err)
		}
		env := img.Config.Env
		for _, want := range append([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, r.ReproducibleEnv()...) {
			if !slices.Contains(env, want) {
				t.Errorf("%s: env %q lacks %q", c.ref, env, want)
			}
		}
		if slices.Contains(env, "SOURCE_DATE_EPOCH=1") || img.Architecture != "arm64" {
			t.Errorf("%s: config %+v: the image's own SOURCE_DATE_EPOCH kept, or its other fields lost", c.ref, img)
		}
	}
	gc := &resolver{err: errors.New("manifest unknown")}
	if _, _, err := r.boundParent(context.Background(), gc, "127.0.0.1:5000/gone:tag", arm); err == nil ||
		!strings.Contains(err.Error(), "resolving 127.0.0.1:5000/gone:tag: manifest unknown") {
		t.Errorf("an image that does not resolve: %v", err)
	}
}
