package sizes

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// sampleReport measures a hand-made set pair with a fake registry: jobs
// changes the order in which answers arrive, not the result.
func sampleReport(t *testing.T, jobs int, uncompressed bool) *Report {
	t.Helper()
	src := &fakeSource{blobs: map[string][]byte{}, manifests: map[string]Manifest{}, calls: map[string]int{}}
	rng := rand.New(rand.NewSource(1))
	layer := func(n int) Blob {
		buf := make([]byte, n)
		rng.Read(buf)
		b := gzipped(t, buf)
		d := blobOf(b)
		src.blobs[d] = b
		return Blob{Digest: d, Size: int64(len(b))}
	}
	cfgs := map[string]Blob{}
	for _, arch := range []string{"amd64", "arm64"} {
		b := []byte(`{"os":"linux","architecture":"` + arch + `"}`)
		cfgs[arch] = Blob{Digest: blobOf(b), Size: int64(len(b))}
		src.blobs[blobOf(b)] = b
	}
	base := layer(5000)
	ids := []Instance{}
	for i, repo := range []string{"django/django", "astropy/astropy", "sympy/sympy", "pytest-dev/pytest"} {
		env := layer(2000 + 100*i)
		for j := 0; j < 3; j++ {
			id := fmt.Sprintf("%s__%s-%d", strings.Split(repo, "/")[0], strings.Split(repo, "/")[1], 100+j)
			ids = append(ids, Instance{ID: id, Repo: repo})
			if !(i == 1 && j == 2) { // one missing in A
				src.manifests["a/"+id+":x86_64"] = Manifest{Digest: "sha256:a" + id, Config: cfgs["amd64"], Layers: []Blob{base, env, layer(300 + j)}}
			}
			if j != 0 {
				src.manifests["b/"+id+":x86_64"] = Manifest{Digest: "sha256:b" + id, Config: cfgs["amd64"], Layers: []Blob{layer(6000), layer(400)}}
			}
		}
	}
	// Ids given in shuffled order: the report must not care.
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	specA, _ := ParseSet("a/{id}:{arch}")
	specB, _ := ParseSet("b/{id}:{arch}")
	tA, _ := specA.Targets(ids, []core.Platform{core.AMD64}, nil)
	tB, _ := specB.Targets(ids, []core.Platform{core.AMD64}, nil)
	opt := Options{Jobs: jobs, Uncompressed: uncompressed}
	a, err := Measure(context.Background(), src, specA, tA, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Measure(context.Background(), src, specB, tB, opt)
	if err != nil {
		t.Fatal(err)
	}
	limit := 5.0
	return NewReport(a, b, uncompressed, &limit)
}

func TestFormatsDeterministic(t *testing.T) {
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var first []byte
			for _, jobs := range []int{1, 3, 16} {
				var buf bytes.Buffer
				if err := Write(&buf, sampleReport(t, jobs, true), format); err != nil {
					t.Fatal(err)
				}
				if first == nil {
					first = buf.Bytes()
				} else if !bytes.Equal(first, buf.Bytes()) {
					t.Fatalf("jobs=%d gives different %s output", jobs, format)
				}
			}
		})
	}
	if err := Write(&bytes.Buffer{}, sampleReport(t, 1, false), "yaml"); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("unknown format: %v", err)
	}
}

func TestCSV(t *testing.T) {
	var buf bytes.Buffer
	rep := sampleReport(t, 4, true)
	if err := WriteCSV(&buf, rep); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Errorf("header = %v", rows[0])
	}
	if len(rows) != 1+len(rep.A.Images)+len(rep.B.Images) {
		t.Fatalf("%d rows for %d+%d images", len(rows), len(rep.A.Images), len(rep.B.Images))
	}
	var keys []string
	var sumA int64
	for _, r := range rows[1:] {
		keys = append(keys, r[0]+" "+r[1]+" "+r[3])
		if r[0] == "A" && r[4] == StatusOK {
			var n int64
			fmt.Sscan(r[7], &n)
			sumA += n
		}
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("rows not sorted: %v", keys)
	}
	if sumA != rep.A.Totals.NaiveCompressedBytes {
		t.Errorf("CSV compressed sum %d, naive total %d", sumA, rep.A.Totals.NaiveCompressedBytes)
	}
}

func TestMarkdown(t *testing.T) {
	var buf bytes.Buffer
	rep := sampleReport(t, 4, false)
	if err := WriteMarkdown(&buf, rep); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	// Every table row of a table has as many cells as its header.
	cells := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			cells = 0
			continue
		}
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1
		if cells == 0 {
			cells = n
		} else if n != cells {
			t.Errorf("row has %d cells, header %d: %s", n, cells, line)
		}
	}
	for _, want := range []string{
		"| unique-layer compressed | " + HumanBytes(rep.A.Totals.UniqueCompressedBytes) + " | " + HumanBytes(rep.B.Totals.UniqueCompressedBytes) + " |",
		"| astropy/astropy | 2 |",
		"### Not measured in A (1)",
		"| astropy__astropy-102 | linux/amd64 | missing |",
		"### Not measured in B (4)",
		"1024-based",
		fmt.Sprintf("(unique-layer compressed, %d common images): **%s**", rep.Comparison.CommonImages, fmtGrowth(rep.Comparison.GrowthPercent)),
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// Without --uncompressed the uncompressed rows are left out.
	if strings.Contains(md, "naive uncompressed") {
		t.Error("uncompressed rows shown although not measured")
	}
	if rep.GrowthExceeded != strings.Contains(md, "**EXCEEDS**") {
		t.Errorf("growth exceeded %v but markdown says otherwise", rep.GrowthExceeded)
	}
}

// TestJSONSchema checks JSON reports against report.schema.json with a
// small validator (type, const, enum, required, properties,
// additionalProperties false, items, $ref, oneOf, minimum), and that every
// property the schema declares has a description.
func TestJSONSchema(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal([]byte(JSONSchema()), &schema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	if id := schema["$id"]; id != SchemaID {
		t.Errorf("schema $id %v, want %s", id, SchemaID)
	}
	checkDescribed(t, "", schema)
	for _, uncompressed := range []bool{false, true} {
		var buf bytes.Buffer
		if err := WriteJSON(&buf, sampleReport(t, 4, uncompressed)); err != nil {
			t.Fatal(err)
		}
		var doc any
		dec := json.NewDecoder(&buf)
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		for _, e := range validate(schema, schema, doc, "$") {
			t.Errorf("uncompressed=%v: %s", uncompressed, e)
		}
	}
	// A report without B: b and comparison are null.
	a := sampleReport(t, 2, false).A
	var buf bytes.Buffer
	if err := WriteJSON(&buf, NewReport(a, nil, false, nil)); err != nil {
		t.Fatal(err)
	}
	var doc any
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, e := range validate(schema, schema, doc, "$") {
		t.Errorf("A only: %s", e)
	}
	// The validator itself rejects what it should.
	bad := map[string]any{"schema": "x"}
	if errs := validate(schema, schema, bad, "$"); len(errs) == 0 {
		t.Error("validator accepted a bad document")
	}
}

func checkDescribed(t *testing.T, path string, node any) {
	switch n := node.(type) {
	case map[string]any:
		if props, ok := n["properties"].(map[string]any); ok {
			for k, v := range props {
				pm, _ := v.(map[string]any)
				_, hasDesc := pm["description"]
				_, isRef := pm["$ref"]
				if !hasDesc && !isRef {
					t.Errorf("schema property %s.%s has no description", path, k)
				}
			}
		}
		for k, v := range n {
			checkDescribed(t, path+"."+k, v)
		}
	case []any:
		for i, v := range n {
			checkDescribed(t, fmt.Sprintf("%s[%d]", path, i), v)
		}
	}
}

func validate(root, s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		def, _ := root["$defs"].(map[string]any)[name].(map[string]any)
		if def == nil {
			return []string{at + ": unknown $ref " + ref}
		}
		return validate(root, def, v, at)
	}
	if one, ok := s["oneOf"].([]any); ok {
		n := 0
		var all []string
		for _, alt := range one {
			errs := validate(root, alt.(map[string]any), v, at)
			if len(errs) == 0 {
				n++
			}
			all = append(all, errs...)
		}
		if n != 1 {
			return append([]string{fmt.Sprintf("%s: matches %d of oneOf", at, n)}, all...)
		}
		return nil
	}
	var errs []string
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		errs = append(errs, fmt.Sprintf("%s: %v is not the const %v", at, v, c))
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v not in %v", at, v, enum))
		}
	}
	if tp, ok := s["type"]; ok {
		var types []string
		switch x := tp.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, y := range x {
				types = append(types, y.(string))
			}
		}
		match := false
		for _, ty := range types {
			if jsonType(v, ty) {
				match = true
			}
		}
		if !match {
			return append(errs, fmt.Sprintf("%s: %T is not %v", at, v, types))
		}
	}
	if min, ok := s["minimum"].(float64); ok {
		if n, ok := v.(json.Number); ok {
			if f, _ := n.Float64(); f < min {
				errs = append(errs, fmt.Sprintf("%s: %v < minimum %v", at, f, min))
			}
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := x[r.(string)]; !ok {
					errs = append(errs, fmt.Sprintf("%s: required %q missing", at, r))
				}
			}
		}
		for k, val := range x {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					errs = append(errs, fmt.Sprintf("%s: property %q not in the schema", at, k))
				}
				continue
			}
			errs = append(errs, validate(root, ps, val, at+"."+k)...)
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, it := range x {
				errs = append(errs, validate(root, items, it, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func jsonType(v any, ty string) bool {
	switch ty {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	}
	return false
}
