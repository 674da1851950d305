package dataset

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// pqRow is a parquet layout other than HuggingFace's string-only one: the
// version as a double, FAIL_TO_PASS as a LIST, PASS_TO_PASS an optional
// string, and an extra column.
type pqRow struct {
	Repo       *string  `parquet:"repo,optional"`
	InstanceID string   `parquet:"instance_id"`
	BaseCommit string   `parquet:"base_commit"`
	TestPatch  string   `parquet:"test_patch"`
	Version    float64  `parquet:"version"`
	FailToPass []string `parquet:"FAIL_TO_PASS,list"`
	PassToPass *string  `parquet:"PASS_TO_PASS,optional"`
	Extra      int64    `parquet:"eval_count"`
}

func TestParquetLayouts(t *testing.T) {
	repo := "acme/widget"
	p2p := `["t::keep"]`
	commit := strings.Repeat("a", 40)
	rows := []pqRow{
		{Repo: &repo, InstanceID: "acme__widget-1", BaseCommit: commit, TestPatch: "t", Version: 1.0, FailToPass: []string{"x", "y"}, PassToPass: &p2p},
		{Repo: &repo, InstanceID: "acme__widget-2", BaseCommit: commit, TestPatch: "t", Version: 1.1, FailToPass: []string{}},
		{Repo: &repo, InstanceID: "acme__widget-3", BaseCommit: "main", TestPatch: "t", Version: 1.0},
		{Repo: nil, InstanceID: "acme__widget-4", BaseCommit: commit, TestPatch: "t", Version: 1.0},
		{Repo: &repo, InstanceID: "acme__widget-1", BaseCommit: commit, TestPatch: "t", Version: 9.5},
	}
	path := filepath.Join(t.TempDir(), "x.parquet")
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	got, err := Load(context.Background(), path, LoadOptions{Known: widgetKnown})
	type row struct {
		ID, Version, Source string
		F2P, P2P            []string
	}
	var gotRows []row
	for _, in := range got {
		gotRows = append(gotRows, row{in.InstanceID, in.Version, strings.TrimPrefix(in.Source, path), in.FailToPass, in.PassToPass})
	}
	want := []row{
		{"acme__widget-1", "1.0", ":row 0", []string{"x", "y"}, []string{"t::keep"}},
		{"acme__widget-2", "1.1", ":row 1", []string{}, []string{}},
	}
	if !reflect.DeepEqual(gotRows, want) {
		t.Errorf("records\n got %+v\nwant %+v", gotRows, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	wantProblems := []string{
		`x.parquet:row 2: field "base_commit": "main" is not a full hex commit id`,
		`x.parquet:row 3: field "repo": is null; a value is required`,
		`x.parquet:row 4: field "version": unknown version "9.5" for repo "acme/widget" (known: 0.9, 1.0, 1.1)`,
		`x.parquet:row 4: field "instance_id": "acme__widget-1" is a duplicate of row 0`,
	}
	if len(ve.Problems) != len(wantProblems) {
		t.Fatalf("problems:\n%v", err)
	}
	for i, w := range wantProblems {
		if !strings.Contains(ve.Problems[i].Error(), w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, ve.Problems[i].Error(), w)
		}
	}
}

func TestParquetWrongTypes(t *testing.T) {
	type bad struct {
		Repo       int32    `parquet:"repo"`
		InstanceID string   `parquet:"instance_id"`
		PassToPass string   `parquet:"PASS_TO_PASS"`
		Patch      []string `parquet:"patch,list"`
	}
	path := filepath.Join(t.TempDir(), "bad.parquet")
	if err := parquet.WriteFile(path, []bad{{Repo: 3, InstanceID: "a-1", PassToPass: "nope", Patch: []string{"p"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(context.Background(), path, LoadOptions{})
	for _, w := range []string{
		`bad.parquet:row 0: field "repo": is a parquet INT32, want a string`,
		`bad.parquet:row 0: field "PASS_TO_PASS": string is not a JSON array of strings`,
		`bad.parquet:row 0: field "patch": is a parquet list, want a string`,
		`bad.parquet:row 0: field "base_commit": missing required field`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\ndoes not contain %q", err, w)
		}
	}
}

func TestParquetMalformed(t *testing.T) {
	path := writeFile(t, "trunc.parquet", "PAR1 this is not parquet")
	_, err := Load(context.Background(), path, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "trunc.parquet: malformed parquet") {
		t.Errorf("err = %v", err)
	}
}

func TestPyFloat(t *testing.T) {
	for in, want := range map[float64]string{3: "3.0", 0.1: "0.1", 1.10: "1.1", 2022.03: "2022.03", 1e16: "1e+16", 1234567: "1234567.0", 1e-5: "1e-05"} {
		if got := pyFloat(in, 64); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestParquetLimits: the row count and uncompressed size come from the
// footer and are checked before any row; a row over the record limit is a
// problem of its own and the other rows load.
func TestParquetLimits(t *testing.T) {
	path := filepath.Join(refDir(t), "datasets", "SWE-bench_Lite", "dev.parquet")
	for _, tc := range []struct {
		name    string
		lim     Limits
		records int
		want    string
	}{
		{"rows", Limits{MaxRows: 22}, 0, path + ": 23 rows, over the limit of 22 rows a file"},
		{"uncompressed size", Limits{MaxFileBytes: 200_000}, 0, "bytes uncompressed, over the limit of 200000 bytes a file"},
	} {
		got, err := Load(context.Background(), path, LoadOptions{Limits: tc.lim})
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Problems[0].Error(), tc.want) || len(got) != tc.records {
			t.Errorf("%s: %d records, %v; want %d records and %q", tc.name, len(got), err, tc.records, tc.want)
		}
	}
	// A record limit between the smallest and the largest row: some rows
	// are problems ("file:row N"), the others load.
	got, err := Load(context.Background(), path, LoadOptions{Limits: Limits{MaxRecordBytes: 10_000}})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(got) == 0 || len(got)+len(ve.Problems) != 23 {
		t.Fatalf("record limit: %d records, %v", len(got), err)
	}
	for _, p := range ve.Problems {
		if !strings.HasPrefix(p.Source, path+":row ") || !strings.Contains(p.Msg, "bytes, over the limit of 10000 bytes a record") {
			t.Errorf("record limit problem: %v", p)
		}
	}
}
