package ci

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/registry"
)

// TestLedgerRoundTrip (issue 20 row 14): a ledger pushed to the target
// repository comes back byte for byte on the next night's pull (a fresh
// client, an empty state directory); a repository with none reports it is
// missing rather than an empty ledger; a second push replaces the first.
func TestLedgerRoundTrip(t *testing.T) {
	reg := regtest.InProcess(t)
	ctx := context.Background()
	repo := reg.Host + "/swebench/nightly"
	c, err := registry.New(registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pulled := filepath.Join(dir, "next-night", "state", "ledger.jsonl")
	if found, err := PullLedger(ctx, c, repo, LedgerTag, pulled); err != nil || found {
		t.Fatalf("pull from a repository with no ledger: found=%v err=%v", found, err)
	}
	if _, err := os.Stat(pulled); !os.IsNotExist(err) {
		t.Errorf("a missing ledger left a file: %v", err)
	}
	// A torn last line is kept as it is: the reader decides about it.
	for i, content := range []string{
		`{"instance_id":"a__b-1","platform":"linux/amd64"}` + "\n" + `{"instance_id":"a__b-2","plat`,
		`{"instance_id":"a__b-3","platform":"linux/arm64"}` + "\n",
	} {
		local := filepath.Join(dir, "ledger.jsonl")
		if err := os.WriteFile(local, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := PushLedger(ctx, c, repo, LedgerTag, local); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		next, err := registry.New(registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		found, err := PullLedger(ctx, next, repo, LedgerTag, pulled)
		if err != nil || !found {
			t.Fatalf("pull %d: found=%v err=%v", i, found, err)
		}
		got, err := os.ReadFile(pulled)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte(content)) {
			t.Errorf("pull %d: %q, want %q", i, got, content)
		}
	}
	if found, err := PullLedger(ctx, c, repo, EnvLedgerTag, filepath.Join(dir, "envs.jsonl")); err != nil || found {
		t.Errorf("env ledger under its own tag: found=%v err=%v", found, err)
	}
}
