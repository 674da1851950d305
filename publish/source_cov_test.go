package publish

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/manifests"
	"github.com/swebuild/swebuild/registry"
)

// writeLayout writes an OCI layout at dir with one random image per entry,
// annotated as given.
func writeLayout(t *testing.T, dir string, entries ...map[string]string) {
	t.Helper()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, ann := range entries {
		img, err := random.Image(32, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}), layout.WithAnnotations(ann)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSourceRead: what a publish run reads from a metadata file or an OCI
// layout, the ledger it defaults to beside it, and what it says about the
// entries it cannot publish.
func TestSourceRead(t *testing.T) {
	ctx := context.Background()
	good := core.Image{Kind: core.KindInstance, InstanceID: "fixture__calc-1", Platform: core.AMD64, Status: core.StatusBuilt,
		Digest: dgA, Ref: "127.0.0.1:5000/b@" + dgA.String(), SpecKey: "sha256:k"}
	line, err := core.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("metadata file with a bad line", func(t *testing.T) {
		meta := write("metadata.jsonl", string(line)+"{\"kind\":\"instance\"}\n"+string(line))
		var warn bytes.Buffer
		s := Source{MetadataFile: meta}
		recs, ledger, problems, err := s.Read(ctx, &warn)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || recs[0].InstanceID != "fixture__calc-1" {
			t.Errorf("records %+v, want the two good lines", recs)
		}
		if ledger != filepath.Join(dir, "publish-ledger.jsonl") {
			t.Errorf("ledger %s, want publish-ledger.jsonl beside the metadata file", ledger)
		}
		if problems == nil || !strings.Contains(problems.Error(), meta+":2: ") {
			t.Errorf("problems = %v, want line 2 named", problems)
		}
		if err := s.ProblemsErr(problems); err == nil || err.Error() != "metadata file has invalid records (see above)" {
			t.Errorf("ProblemsErr = %v", err)
		}
		if err := s.ProblemsErr(nil); err != nil {
			t.Errorf("ProblemsErr(nil) = %v", err)
		}
	})
	t.Run("metadata file with nothing good", func(t *testing.T) {
		meta := write("bad.jsonl", "{\"kind\":\"instance\"}\n{\"kind\":\"instance\"}\n")
		recs, _, _, err := Source{MetadataFile: meta}.Read(ctx, nil)
		if err == nil || recs != nil || !strings.Contains(err.Error(), meta+":1: ") {
			t.Errorf("records %+v, err %v; want the lines' error", recs, err)
		}
	})
	t.Run("missing metadata file", func(t *testing.T) {
		_, _, _, err := Source{MetadataFile: filepath.Join(dir, "absent.jsonl")}.Read(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
			t.Errorf("err = %v, want the file named", err)
		}
	})

	inst := func(id, specKey string) map[string]string {
		ann := map[string]string{ociRefName: "sweb.eval.x86_64." + id + ":latest", manifests.AnnotationInstanceID: id}
		if specKey != "" {
			ann[manifests.AnnotationSpecKey] = specKey
		}
		return ann
	}
	t.Run("layout with a bad entry", func(t *testing.T) {
		root := t.TempDir()
		lay := filepath.Join(root, "oci")
		writeLayout(t, lay, map[string]string{ociRefName: "sweb.env.py.x86_64.abc:latest"}, inst("a__a-1", "sha256:k"), inst("b__b-1", ""))
		s := Source{Layout: lay + "/"}
		recs, ledger, problems, err := s.Read(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].InstanceID != "a__a-1" || recs[0].OCILayout != lay {
			t.Errorf("records %+v, want a__a-1 from %s", recs, lay)
		}
		if ledger != filepath.Join(root, "publish-ledger.jsonl") {
			t.Errorf("ledger %s, want publish-ledger.jsonl beside the layout directory", ledger)
		}
		if problems == nil || !strings.Contains(problems.Error(), filepath.Join(lay, "index.json")+": manifests[2] (b__b-1): spec_key") {
			t.Errorf("problems = %v, want index.json, the entry and spec_key named", problems)
		}
		if err := s.ProblemsErr(problems); err == nil || err.Error() != "OCI layout has entries that cannot be published (see above)" {
			t.Errorf("ProblemsErr = %v", err)
		}
	})
	t.Run("layout with only bad entries", func(t *testing.T) {
		lay := filepath.Join(t.TempDir(), "oci")
		writeLayout(t, lay, inst("b__b-1", ""))
		recs, _, _, err := Source{Layout: lay}.Read(ctx, nil)
		if err == nil || recs != nil || !strings.Contains(err.Error(), "(b__b-1): spec_key") {
			t.Errorf("records %+v, err %v", recs, err)
		}
	})
	t.Run("layout without instance images", func(t *testing.T) {
		lay := filepath.Join(t.TempDir(), "oci")
		writeLayout(t, lay, map[string]string{ociRefName: "sweb.base.py.x86_64:latest"})
		_, _, _, err := Source{Layout: lay}.Read(ctx, nil)
		if err == nil || err.Error() != "OCI layout "+lay+" names no instance image (index.json entries with "+manifests.AnnotationInstanceID+")" {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no layout there", func(t *testing.T) {
		_, _, _, err := Source{Layout: filepath.Join(dir, "absent")}.Read(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "opening OCI layout") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestRunReportsLedgerDamageAndPublishes: a run over a ledger with a
// damaged line and a torn last line says both (file and line) and goes
// on; the image and its index are published; the ledger file is the
// one named.
func TestRunReportsLedgerDamageAndPublishes(t *testing.T) {
	dst := startMem(t)
	f := makeFixture(t, []string{"a__a-1"}, map[string]bool{"a__a-1": true}, 1024, 1)
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	prev, err := core.Marshal(publishedRec("z__z-1", core.AMD64, dgA))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledgerPath, append(append(prev, "{not a record}\n"...), `{"kind":"index","instance_id":"z`...), 0o644); err != nil {
		t.Fatal(err)
	}
	var warn, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := Run(ctx, f.recs(), RunOptions{
		Options:    Options{Repo: dst.host() + "/run", Jobs: 2, Version: "test", Progress: &progress},
		LedgerPath: ledgerPath,
		Registry:   registry.Options{MaxRPS: -1, Budget: testBudget, Keychain: regtest.Anonymous()},
		Warnings:   &warn,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if sum.ImagesPushed != 1 || sum.IndexesPushed != 1 || sum.Err() != nil {
		t.Errorf("summary %+v\n%s", sum, progress.String())
	}
	w := warn.String()
	if !strings.Contains(w, "warning: "+ledgerPath+":3: dropped a torn last line") {
		t.Errorf("warnings do not name the torn line 3:\n%s", w)
	}
	if !strings.Contains(w, "warning: "+ledgerPath+":2: ") || !strings.Contains(w, "line skipped; what it recorded is checked against the registry again") {
		t.Errorf("warnings do not name the damaged line 2:\n%s", w)
	}
	b, err := os.ReadFile(ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"instance_id":"a__a-1"`) {
		t.Errorf("the ledger does not record the publish:\n%s", b)
	}
}

// TestLedgerTornAndPath: the ledger says the torn line it dropped (file
// and line) and its path; a whole ledger has no torn line.
func TestLedgerTornAndPath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ledger.jsonl")
	rec, err := core.Marshal(publishedRec("a", core.AMD64, dgA))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(rec, `{"kind":"blob","ref":"h/r@`...), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Path() != p {
		t.Errorf("Path = %s, want %s", l.Path(), p)
	}
	if tl := l.Torn(); tl == nil || tl.File != p || tl.Line != 2 {
		t.Errorf("Torn = %+v, want %s line 2", tl, p)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = OpenLedger(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if tl := l.Torn(); tl != nil {
		t.Errorf("reopened after the torn line was cut: Torn = %+v", tl)
	}
}

// TestRunRefusedRegistry: a registry that refuses the push fails the run
// before the ledger is opened or anything is pushed, naming the host.
func TestRunRefusedRegistry(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	f := makeFixture(t, []string{"a__a-1"}, map[string]bool{"a__a-1": true}, 256, 1)
	ledgerPath := filepath.Join(t.TempDir(), "ledger.jsonl")
	_, err := Run(context.Background(), f.recs(), RunOptions{
		Options:    Options{Repo: host + "/denied"},
		LedgerPath: ledgerPath,
		Registry:   registry.Options{MaxRPS: -1, Keychain: regtest.Anonymous()},
	})
	if err == nil || !strings.Contains(err.Error(), host) {
		t.Fatalf("err = %v, want the host named", err)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("%d upload requests, want the one check", n)
	}
	if _, err := os.Stat(ledgerPath); !os.IsNotExist(err) {
		t.Errorf("ledger created before the check passed: %v", err)
	}
	if got := Targets(Options{Repo: host + "/denied"}, nil); got != nil {
		t.Errorf("Targets of no ids = %v", got)
	}
	if got := Targets(Options{Repo: "r.example/ns"}, []string{"b__b-2", "a__a-1"}); len(got) != 1 || got[0] != "r.example/ns/sweb.eval.x86_64.a_1776_a-1" {
		t.Errorf("Targets = %v, want the per-arch repository of the first id", got)
	}
}
