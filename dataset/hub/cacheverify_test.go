package hub_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/dataset/hub"
	"github.com/swebuild/swebuild/dataset/hub/hubtest"
)

// A cached file edited in place to the same size (issue 20 row 11: it was
// trusted by its size alone) is checked against the sha256 the hub lists
// (an LFS file) or the one recorded when it was downloaded (any other
// file): online it is downloaded again, offline it is an error naming the
// file.
func TestCachedFileIsCheckedByDigestNotSize(t *testing.T) {
	jsonl := []byte(`{"instance_id": "acme__w-1"}` + "\n")
	for _, tc := range []struct {
		name, repo, path string
		content          func(t *testing.T) []byte
	}{
		{"lfs parquet", "SWE-bench/SWE-bench_Lite", devPath, liteDev},
		{"plain jsonl", "acme/plain", "data/dev.jsonl", func(*testing.T) []byte { return jsonl }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := tc.content(t)
			s := hubtest.New(t)
			s.Commit(tc.repo, "main", map[string][]byte{"README.md": []byte("# x\n"), tc.path: content},
				hubtest.Card(map[string]string{"dev": tc.path}))
			dir := t.TempDir()
			ctx := context.Background()
			snap, err := newClient(t, s, dir, hub.Options{}).Fetch(ctx, ref(t, tc.repo+":dev"))
			if err != nil {
				t.Fatal(err)
			}
			local := snap.Files[0].Local
			b, _ := os.ReadFile(local)
			b[len(b)/2] ^= 0x20 // same size, other bytes
			if err := os.WriteFile(local, b, 0o644); err != nil {
				t.Fatal(err)
			}
			// Offline: refused, naming the file.
			_, err = newClient(t, s, dir, hub.Options{Offline: true}).Fetch(ctx, ref(t, tc.repo+":dev"))
			if err == nil || !errors.Is(err, hub.ErrOffline) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "sha256") {
				t.Errorf("offline with a damaged cached file: %v", err)
			}
			// Online: fetched again.
			resolve := "/datasets/" + tc.repo + "/resolve/" + snap.Revision + "/" + tc.path
			before := s.RequestsTo(resolve)
			snap, err = newClient(t, s, dir, hub.Options{}).Fetch(ctx, ref(t, tc.repo+":dev"))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(snap.Files[0].Local); !bytes.Equal(got, content) {
				t.Errorf("the damaged cached file was used")
			}
			if n := s.RequestsTo(resolve) - before; n != 1 {
				t.Errorf("%d downloads after the damage, want 1", n)
			}
			// An intact cache is used as it is.
			c := newClient(t, s, dir, hub.Options{Offline: true})
			if _, err := c.Fetch(ctx, ref(t, tc.repo+":dev")); err != nil || c.Requests() != 0 {
				t.Errorf("intact cache: %v, %d requests", err, c.Requests())
			}
		})
	}
}
