package builder

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/swebuild/swebuild/builder/graph"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// TestProvenancePushed builds a two-node graph on the stack with a push and
// reads back, with ggcr alone, what a consumer sees: the node's digest is
// the per-arch image manifest, and beside it is BuildKit's attestation
// manifest, an OCI artifact whose subject is that image, holding an in-toto
// SLSA provenance statement (mode=max) that names the Dockerfile, the
// context files and the frontend inputs.
func TestProvenancePushed(t *testing.T) {
	stacktest.Thorough(t)
	st := stacktest.Require(t)
	host, reg := st.BuildkitHost, st.Registry
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	salt := time.Now().Format(time.RFC3339Nano)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "payload.bin"), []byte("payload "+salt), 0o644); err != nil {
		t.Fatal(err)
	}
	p := core.AMD64
	baseKey := "swebuild-prov.base.x86_64:latest"
	df := "FROM " + baseKey + "\nARG SALT=" + salt + "\nCOPY setup_repo.sh /root/\n"
	nodes := []*graph.Node{
		{Key: baseKey, Kind: graph.KindBase, Platform: p, Dockerfile: []byte("FROM scratch\nCOPY payload.bin /base/payload.bin\n"),
			ContextFiles: map[string]string{"payload.bin": filepath.Join(dir, "payload.bin")}},
		{Key: "swebuild-prov.eval.x86_64.one:latest", Kind: graph.KindInstance, Platform: p, InstanceID: "prov__one-1", Parents: []string{baseKey},
			Dockerfile: []byte(df), Context: map[string][]byte{"setup_repo.sh": []byte("echo " + salt + "\n")}},
	}
	push := reg + "/swebuild-test/provenance"
	rep, err := Build(ctx, nodes, Options{Builders: []BuilderSpec{{Addr: host}}, Workers: 2, RunDir: t.TempDir(), Progress: "quiet", Push: push})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, res := range rep.Results {
		o := res.Outcome
		if o.Attestation == "" {
			t.Fatalf("%s: no attestation digest (outcome %+v)", res.Node.ID(), o)
		}
		ref, err := name.ParseReference(o.Ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := ggcrremote.Get(ref, ggcrremote.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s: %v", o.Ref, err)
		}
		if !desc.MediaType.IsImage() {
			t.Fatalf("%s: the node digest is a %s, want an image manifest", o.Ref, desc.MediaType)
		}
		stmt := provenanceStatement(t, ctx, push+"@"+o.Attestation, o.Digest)
		if res.Node.Kind != graph.KindInstance {
			continue
		}
		checkProvenance(t, res.Node.ID(), stmt, df, "/setup_repo.sh")
	}
}

// checkProvenance checks a mode=max SLSA v1 provenance predicate names the
// Dockerfile (its path and its bytes), the frontend, the local contexts sent
// and an in-memory context file (its mkfile in the LLB).
func checkProvenance(t *testing.T, what string, stmt []byte, dockerfile, ctxFile string) {
	t.Helper()
	var st struct {
		Predicate struct {
			BuildDefinition struct {
				ExternalParameters struct {
					ConfigSource struct{ Path string } `json:"configSource"`
					Request      struct {
						Frontend string
						Locals   []struct{ Name string }
					} `json:"request"`
				} `json:"externalParameters"`
				InternalParameters struct {
					BuildConfig struct {
						LLBDefinition []json.RawMessage `json:"llbDefinition"`
					} `json:"buildConfig"`
				} `json:"internalParameters"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Metadata struct {
					BuildkitMetadata struct {
						Source struct {
							Infos []struct {
								Filename string
								Data     []byte
							}
						}
					} `json:"buildkit_metadata"`
				}
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(stmt, &st); err != nil {
		t.Fatalf("%s: provenance: %v", what, err)
	}
	bd := st.Predicate.BuildDefinition
	if bd.ExternalParameters.ConfigSource.Path != "Dockerfile" || bd.ExternalParameters.Request.Frontend != "dockerfile.v0" {
		t.Errorf("%s: provenance configSource %+v frontend %q, want Dockerfile through dockerfile.v0", what, bd.ExternalParameters.ConfigSource, bd.ExternalParameters.Request.Frontend)
	}
	if len(bd.ExternalParameters.Request.Locals) == 0 {
		t.Errorf("%s: provenance names no local context", what)
	}
	found := false
	for _, in := range st.Predicate.RunDetails.Metadata.BuildkitMetadata.Source.Infos {
		if in.Filename == "Dockerfile" && string(in.Data) == dockerfile {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: provenance source infos lack the Dockerfile %q", what, dockerfile)
	}
	found = false
	for _, step := range bd.InternalParameters.BuildConfig.LLBDefinition {
		if strings.Contains(string(step), `"mkfile":{"path":"`+ctxFile+`"`) || strings.Contains(string(step), `"path":"`+ctxFile+`"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: provenance buildConfig (mode=max) has no step writing %s", what, ctxFile)
	}
}

// provenanceStatement reads the attestation manifest at ref and returns
// its provenance statement, checking its subject is image.
func provenanceStatement(t *testing.T, ctx context.Context, ref, image string) []byte {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := ggcrremote.Image(r, ggcrremote.WithContext(ctx))
	if err != nil {
		t.Fatalf("attestation %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest.String() != image {
		t.Errorf("attestation %s: subject %+v, want %s", ref, m.Subject, image)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		if m.Layers[i].Annotations["in-toto.io/predicate-type"] == "" {
			continue
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Type          string `json:"_type"`
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("attestation %s layer %d: %v", ref, i, err)
		}
		if !strings.HasPrefix(st.PredicateType, "https://slsa.dev/provenance/") {
			continue
		}
		if len(st.Subject) == 0 || "sha256:"+st.Subject[0].Digest["sha256"] != image {
			t.Errorf("attestation %s: statement subject %+v, want %s", ref, st.Subject, image)
		}
		t.Logf("%s: %s, %d bytes, manifest layer annotations %v", ref, st.PredicateType, len(b), m.Layers[i].Annotations)
		return b
	}
	t.Fatalf("attestation %s: no SLSA provenance layer in %+v", ref, m.Layers)
	return nil
}
