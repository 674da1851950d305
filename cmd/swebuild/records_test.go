package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/ci"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/sizes"
)

// TestTornLedgerOneReader: a ledger whose last line is torn (what a publish
// killed mid-append leaves) is read the same way by publish (which resumes
// on it), ci matrix, sizes and verify's reader: the records before the torn
// line, a warning where the command has somewhere to say it, no error.
func TestTornLedgerOneReader(t *testing.T) {
	full, err := os.ReadFile(filepath.Join("testdata", "records", "demo-ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := core.Decode(bytes.NewReader(full), "demo-ledger.jsonl")
	if err != nil || len(want) != 20 {
		t.Fatalf("the real ledger: %d records, %v", len(want), err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(full), "\n"), "\n")
	last := lines[len(lines)-1]
	dir := t.TempDir()
	fullPath := filepath.Join(dir, "full.jsonl")
	tornPath := filepath.Join(dir, "torn.jsonl")
	// The torn line is the first 100 bytes of a record, with no newline.
	if err := os.WriteFile(fullPath, full, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tornPath, append(append([]byte{}, full...), last[:100]...), 0o644); err != nil {
		t.Fatal(err)
	}

	// verify's reader (pipeline.VerifyOptions.images) and publish's
	// --metadata-file reader.
	var warn bytes.Buffer
	got, err := core.ReadRecords(tornPath, &warn)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("core.ReadRecords: %d records, %v; want the %d before the torn line", len(got), err, len(want))
	}
	if !strings.Contains(warn.String(), "torn.jsonl:21: dropped a torn last line") {
		t.Errorf("no warning naming the torn line: %q", warn.String())
	}

	// ci matrix: the same plan as from the whole ledger, a warning, exit 0.
	ids := filepath.Join(dir, "ids.txt")
	var idList []string
	for _, r := range want {
		if !slices.Contains(idList, r.InstanceID) {
			idList = append(idList, r.InstanceID)
		}
	}
	if err := os.WriteFile(ids, []byte(strings.Join(idList, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plans := map[string][]byte{}
	for _, ledger := range []string{fullPath, tornPath} {
		var stdout, stderr bytes.Buffer
		planPath := ledger + ".plan.json"
		code := run([]string{"ci", "matrix", "--ids", ids, "--ledger", ledger, "--plan-out", planPath, "--github-output", filepath.Join(dir, "gh")}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("ci matrix --ledger %s: exit %d: %s", filepath.Base(ledger), code, stderr.String())
		}
		if strings.Contains(stderr.String(), "torn") != (ledger == tornPath) {
			t.Errorf("ci matrix --ledger %s: stderr %q", filepath.Base(ledger), stderr.String())
		}
		plans[ledger], _ = os.ReadFile(planPath)
	}
	if !bytes.Equal(plans[fullPath], plans[tornPath]) || !bytes.Contains(plans[fullPath], []byte(`"previously_verified": true`)) {
		t.Errorf("ci matrix plans differ, or read no ledger record:\nwhole ledger: %s\ntorn ledger: %s", plans[fullPath], plans[tornPath])
	}
	if recs, err := ci.ReadLedger(context.Background(), tornPath, nil); err != nil || !reflect.DeepEqual(recs, want) {
		t.Errorf("ci.ReadLedger: %d records, %v", len(recs), err)
	}

	// sizes --images LEDGER: the same targets.
	tFull, errFull := sizes.LoadImageFile(context.Background(), fullPath)
	tTorn, errTorn := sizes.LoadImageFile(context.Background(), tornPath)
	if errFull != nil || errTorn != nil || len(tFull) == 0 || !reflect.DeepEqual(tFull, tTorn) {
		t.Errorf("sizes.LoadImageFile: %d targets (%v) from the whole ledger, %d (%v) from the torn one", len(tFull), errFull, len(tTorn), errTorn)
	}

	// publish resumes: the same records, the torn tail cut, the next record
	// on a line of its own that every reader then sees.
	l, err := publish.OpenLedger(tornPath)
	if err != nil {
		t.Fatal(err)
	}
	if tl := l.Torn(); tl == nil || tl.Line != 21 {
		t.Errorf("publish.OpenLedger: torn line %v, want line 21 (for its warning)", tl)
	}
	if !sameRecords(l.Records(), want) || len(l.Damaged()) != 0 {
		t.Errorf("publish.OpenLedger: %d records, %d damaged; want the %d before the torn line", len(l.Records()), len(l.Damaged()), len(want))
	}
	next := want[len(want)-1]
	next.Time = "2026-12-01T15:00:00Z"
	if err := l.Append(next); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	warn.Reset()
	after, err := core.ReadRecords(tornPath, &warn)
	if err != nil || warn.Len() > 0 || len(after) != len(want)+1 || !reflect.DeepEqual(after[:len(want)], want) {
		t.Errorf("after publish resumed: %d records, %v, warning %q", len(after), err, warn.String())
	}
}

// sameRecords compares records ignoring order (publish keeps the last per
// image; the real ledger has one record per image).
func sameRecords(a, b []core.Image) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]core.Image{}
	for _, r := range b {
		seen[r.ID()] = r
	}
	for _, r := range a {
		if s, ok := seen[r.ID()]; !ok || !reflect.DeepEqual(s, r) {
			return false
		}
	}
	return true
}
