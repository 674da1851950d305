package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Platform
		err  string
	}{
		{"linux/amd64", AMD64, ""},
		{"amd64", AMD64, ""},
		{"x86_64", AMD64, ""},
		{"linux/x86_64", AMD64, ""},
		{"linux/arm64", ARM64, ""},
		{"linux/arm64/v8", ARM64, ""},
		{"arm64", ARM64, ""},
		{"aarch64", ARM64, ""},
		{" linux/arm64 ", ARM64, ""},
		{"", Platform{}, "empty platform"},
		{"linux/arm/v7", Platform{}, "not supported"},
		{"windows/amd64", Platform{}, "not supported"},
		{"linux/s390x", Platform{}, "not supported"},
		{"linux/arm64/v9", Platform{}, "not supported"},
		{"not a platform!", Platform{}, "platform"},
	} {
		got, err := ParsePlatform(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePlatform(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePlatform(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPlatformNames(t *testing.T) {
	for _, tc := range []struct {
		p                              Platform
		arch, goarch, dockerfile, slug string
	}{
		{AMD64, "x86_64", "amd64", "linux/x86_64", "linux-amd64"},
		{ARM64, "arm64", "arm64", "linux/arm64/v8", "linux-arm64"},
	} {
		if got := tc.p.Arch(); got != tc.arch {
			t.Errorf("%s.Arch() = %q, want %q", tc.p, got, tc.arch)
		}
		if got := tc.p.GOARCH(); got != tc.goarch {
			t.Errorf("%s.GOARCH() = %q, want %q", tc.p, got, tc.goarch)
		}
		if got := tc.p.Dockerfile(); got != tc.dockerfile {
			t.Errorf("%s.Dockerfile() = %q, want %q", tc.p, got, tc.dockerfile)
		}
		if got := tc.p.Slug(); got != tc.slug {
			t.Errorf("%s.Slug() = %q, want %q", tc.p, got, tc.slug)
		}
		if o := tc.p.OCI(); o.OS != "linux" || o.Architecture != tc.goarch {
			t.Errorf("%s.OCI() = %+v", tc.p, o)
		}
		// The upstream arch name parses back to the same platform.
		if back, err := ParsePlatform(tc.arch); err != nil || back != tc.p {
			t.Errorf("ParsePlatform(%q) = %q, %v; want %q", tc.arch, back, err, tc.p)
		}
	}
	var zero Platform
	if !zero.IsZero() || AMD64.IsZero() || ARM64.IsZero() || zero.Arch() != "" || zero.String() != "" || zero.Dockerfile() != "" {
		t.Errorf("the zero platform must be no platform")
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := ParsePlatforms([]string{"linux/arm64,amd64", "x86_64"})
	if err != nil || fmt.Sprint(got) != "[linux/amd64 linux/arm64]" {
		t.Fatalf("ParsePlatforms = %v, %v", got, err)
	}
	if _, err := ParsePlatforms([]string{""}); err == nil {
		t.Fatalf("empty list: want an error")
	}
	if _, err := ParsePlatforms([]string{"linux/amd64,linux/ppc64le"}); err == nil || !strings.Contains(err.Error(), "ppc64le") {
		t.Fatalf("bad element: %v", err)
	}
}

const dg = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

func built(id string, p Platform) Image {
	return Image{Kind: KindInstance, InstanceID: id, Platform: p, Digest: dg, Ref: "r/x@" + dg, SpecKey: "k", Status: StatusBuilt}
}

func TestValidate(t *testing.T) {
	ok := built("a__b-1", AMD64)
	for _, tc := range []struct {
		name  string
		edit  func(*Image)
		field string
	}{
		{"good", func(*Image) {}, ""},
		{"no kind", func(im *Image) { im.Kind = "" }, "kind"},
		{"bad kind", func(im *Image) { im.Kind = "layer" }, "kind"},
		{"no status", func(im *Image) { im.Status = "" }, "status"},
		{"bad status", func(im *Image) { im.Status = "ok" }, "status"},
		{"no instance id", func(im *Image) { im.InstanceID = "" }, "instance_id"},
		{"no platform", func(im *Image) { im.Platform = Platform{} }, "platform"},
		{"bad digest", func(im *Image) { im.Digest = "sha256:12"; im.Ref = "r/x@sha256:12" }, "digest"},
		{"md5 digest", func(im *Image) { im.Digest = "md5:00"; im.Ref = "r/x@md5:00" }, "digest"},
		{"ref not pinned", func(im *Image) { im.Ref = "r/x:latest" }, "ref"},
		{"ref other digest", func(im *Image) { im.Ref = "r/x@sha256:" + strings.Repeat("2", 64) }, "ref"},
		{"built, not pushed", func(im *Image) { im.Ref = "" }, ""},
		{"built with layout only", func(im *Image) { im.Ref = ""; im.OCILayout = "oci/x" }, ""},
		{"built without digest", func(im *Image) { im.Digest = ""; im.Ref = "" }, "digest"},
		{"built without spec key", func(im *Image) { im.SpecKey = "" }, "spec_key"},
		{"built with error", func(im *Image) { im.Error = "boom" }, "error"},
		{"failed without error", func(im *Image) { im.Status = StatusFailed }, "error"},
		{"failed", func(im *Image) { im.Status = StatusFailed; im.Error = "boom"; im.Digest = ""; im.Ref = "" }, ""},
		{"negative size", func(im *Image) { im.Size = -1 }, "size"},
		{"verification", func(im *Image) { im.Verification, im.VerificationSize = dg, 1200 }, ""},
		{"verification not sha256", func(im *Image) { im.Verification, im.VerificationSize = "md5:00", 1200 }, "verification"},
		{"verification without size", func(im *Image) { im.Verification = dg }, "verification_size"},
		{"bad time", func(im *Image) { im.Time = "yesterday" }, "time"},
		{"env without key", func(im *Image) { im.Kind = KindEnv; im.InstanceID = "" }, "key"},
		{"env", func(im *Image) { im.Kind = KindEnv; im.InstanceID = ""; im.Key = "sweb.env.py.x86_64.abc:latest" }, ""},
		{"index with platform", func(im *Image) { im.Kind = KindIndex; im.Status = StatusPublished }, "platform"},
		{"index", func(im *Image) { im.Kind = KindIndex; im.Platform = Platform{}; im.Status = StatusPublished }, ""},
		{"blob with platform", func(im *Image) { im.Kind = KindBlob; im.InstanceID = ""; im.Status = StatusPublished }, "platform"},
		{"blob without ref", func(im *Image) {
			im.Kind = KindBlob
			im.InstanceID = ""
			im.Platform = Platform{}
			im.Ref = ""
			im.Status = StatusPublished
		}, "ref"},
		{"blob upload started", func(im *Image) {
			im.Kind = KindBlob
			im.InstanceID, im.Platform, im.SpecKey = "", Platform{}, ""
			im.Status, im.Error = StatusFailed, "upload started, not confirmed"
		}, ""},
		{"blob", func(im *Image) {
			im.Kind = KindBlob
			im.InstanceID = ""
			im.Platform = Platform{}
			im.SpecKey = ""
			im.Status = StatusPublished
		}, ""},
		{"published without ref", func(im *Image) { im.Status = StatusPublished; im.Ref = ""; im.OCILayout = "x" }, "ref"},
	} {
		im := ok
		tc.edit(&im)
		err := im.Validate()
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: error %v, want one naming field %q", tc.name, err, tc.field)
		}
	}
}

func TestDecodeNamesLineAndField(t *testing.T) {
	good, _ := Marshal(built("a__b-1", AMD64))
	in := string(good) +
		"\n" + // blank line: skipped, still counted
		`{"kind":"instance","instance_id":"x","platform":"linux/amd64","status":"built","digest":"` + dg + `","ref":"r@` + dg + `","spec_key":"k","arch":"x86_64"}` + "\n" +
		`{"kind":"instance","instance_id":"x","platform":"amd64","status":"built"}` + "\n" +
		`{"kind":"instance","instance_id":"x","platform":"linux/amd64","status":"failed"}` + "\n" +
		"not json\n" +
		string(good)
	recs, err := Decode(strings.NewReader(in), "meta.jsonl")
	if len(recs) != 2 {
		t.Fatalf("got %d good records, want 2", len(recs))
	}
	for _, want := range []string{
		`meta.jsonl:3: not a record: json: unknown field "arch"`,
		`meta.jsonl:4: platform: "amd64" is not linux/amd64 or linux/arm64`,
		`meta.jsonl:5: error: required when status is failed`,
		`meta.jsonl:6: not a record`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\n does not contain %q", err, want)
		}
	}
}

func TestDecodeLongLine(t *testing.T) {
	good, _ := Marshal(built("a__b-1", AMD64))
	in := string(good) + `{"kind":"` + strings.Repeat("x", MaxLine+10) + "\"}\n" + string(good)
	recs, err := Decode(strings.NewReader(in), "f")
	if len(recs) != 2 || err == nil || !strings.Contains(err.Error(), "f:2: line longer than") {
		t.Fatalf("got %d records, err %v", len(recs), err)
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.jsonl")
	in := []Image{built("b", ARM64), built("a", AMD64)}
	in[1].OCILayout = "oci/a"
	in[1].Verified = Bool(true)
	in[1].Sizes = &Sizes{Compressed: 10, Uncompressed: 20}
	in[1].Verification, in[1].VerificationSize = dg, 1200
	if err := WriteFile(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadFile(path)
	if err != nil || len(out) != 2 {
		t.Fatalf("ReadFile: %v, %d records", err, len(out))
	}
	if out[1].OCILayout != filepath.Join(dir, "oci/a") || !out[1].IsVerified() || out[1].Sizes.Uncompressed != 20 || out[1].Verification != dg || out[1].VerificationSize != 1200 {
		t.Fatalf("round trip lost fields: %+v", out[1])
	}
	if err := WriteFile(path, []Image{{Kind: KindInstance}}); err == nil {
		t.Fatalf("writing an invalid record must fail")
	}
	if again, _ := ReadFile(path); len(again) != 2 {
		t.Fatalf("a failed write must leave the old file: %d records", len(again))
	}
}

func TestLatest(t *testing.T) {
	a1 := built("a", AMD64)
	a2 := built("a", AMD64)
	a2.Status, a2.Error, a2.Digest, a2.Ref = StatusFailed, "boom", "", ""
	b := built("b", AMD64)
	got := Latest([]Image{a1, b, a2})
	if len(got) != 2 || got[0].InstanceID != "a" || got[0].Status != StatusFailed || got[1].InstanceID != "b" {
		t.Fatalf("Latest = %+v", got)
	}
}

func TestLogExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, _, _, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := OpenLog(path); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second writer: %v, want ErrInUse naming the file", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _, _, err := OpenLog(path)
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	l2.Close()
}

func TestLogConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, _, _, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			im := built(fmt.Sprintf("id-%03d", i), AMD64)
			im.Error = ""
			if err := l.Append(im); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := l.Append(Image{Kind: KindInstance}); err == nil {
		t.Fatalf("appending an invalid record must fail")
	}
	l.Close()
	recs, err := ReadFile(path)
	if err != nil || len(recs) != 200 {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
}

func TestLogTornAndDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	good, _ := Marshal(built("a", AMD64))
	torn := good[:len(good)/2]
	if err := os.WriteFile(path, append(append(append([]byte{}, good...), "garbage\n"...), torn...), 0o644); err != nil {
		t.Fatal(err)
	}
	l, recs, damaged, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || len(damaged) != 1 || damaged[0].Line != 2 {
		t.Fatalf("recs %d, damaged %v", len(recs), damaged)
	}
	if err := l.Append(built("b", ARM64)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[1] != "garbage" || !strings.Contains(lines[2], `"instance_id":"b"`) {
		t.Fatalf("torn tail not dropped before appending:\n%s", data)
	}
}

// TestReadRecordsTornTail: the one reader drops a torn last line with a
// warning, keeps a whole last record without its newline, and reports
// damage anywhere else as an error naming the line; OpenLog returns the
// same records and leaves a file every reader reads without a warning.
func TestReadRecordsTornTail(t *testing.T) {
	a, _ := Marshal(built("a", AMD64))
	b, _ := Marshal(built("b", ARM64))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name    string
		data    []byte
		ids     []string
		warn    string // substring; "" = no warning
		errLine string // substring of the error; "" = none
	}{
		{"whole", cat(a, b), []string{"a", "b"}, "", ""},
		{"torn tail", cat(a, b[:40]), []string{"a"}, "f.jsonl:2: dropped a torn last line", ""},
		{"last record without newline", cat(a, b[:len(b)-1]), []string{"a", "b"}, "", ""},
		{"damage in the middle", cat(a, []byte("garbage\n"), b), []string{"a", "b"}, "", "f.jsonl:2: not a record"},
		{"damage and a torn tail", cat([]byte("{}\n"), a, b[:40]), []string{"a"}, "f.jsonl:3: dropped", "f.jsonl:1: "},
	} {
		path := filepath.Join(t.TempDir(), "f.jsonl")
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		var warn bytes.Buffer
		recs, err := ReadRecords(path, &warn)
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.InstanceID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
			t.Errorf("%s: records %v, want %v", tc.name, ids, tc.ids)
		}
		if (tc.warn == "") != (warn.Len() == 0) || !strings.Contains(warn.String(), tc.warn) {
			t.Errorf("%s: warning %q, want %q", tc.name, warn.String(), tc.warn)
		}
		if (tc.errLine == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.errLine) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.errLine)
		}
		l, logRecs, _, err := OpenLog(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		if len(logRecs) != len(recs) {
			t.Errorf("%s: OpenLog read %d records, ReadRecords %d", tc.name, len(logRecs), len(recs))
		}
		warn.Reset()
		again, _ := ReadRecords(path, &warn)
		if len(again) != len(recs) || warn.Len() > 0 {
			t.Errorf("%s: after OpenLog: %d records, warning %q", tc.name, len(again), warn.String())
		}
	}
}

// TestPlatformText: a Platform is written as the canonical string and read
// back only from it; anything else is refused, naming the value.
func TestPlatformText(t *testing.T) {
	type doc struct {
		P    Platform            `json:"p"`
		Opt  Platform            `json:"opt,omitzero"`
		List []Platform          `json:"list"`
		ByP  map[Platform]string `json:"by_p"`
	}
	in := doc{P: ARM64, List: []Platform{AMD64, ARM64}, ByP: map[Platform]string{ARM64: "b", AMD64: "a"}}
	const want = `{"p":"linux/arm64","list":["linux/amd64","linux/arm64"],"by_p":{"linux/amd64":"a","linux/arm64":"b"}}`
	b, err := json.Marshal(in)
	if err != nil || string(b) != want {
		t.Fatalf("Marshal = %s, %v; want %s", b, err, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil || out.P != ARM64 || !out.Opt.IsZero() || fmt.Sprint(out.List) != "[linux/amd64 linux/arm64]" || out.ByP[AMD64] != "a" {
		t.Fatalf("Unmarshal(%s) = %+v, %v", b, out, err)
	}
	if b, err := json.Marshal(doc{}); err != nil || string(b) != `{"p":"","list":null,"by_p":null}` {
		t.Fatalf("zero: Marshal = %s, %v", b, err)
	}
	for _, bad := range []string{"linux/s390x", "amd64", "x86_64", "linux/arm64/v8", " linux/amd64"} {
		var p Platform
		err := json.Unmarshal([]byte(`"`+bad+`"`), &p)
		var pe *PlatformError
		if !errors.As(err, &pe) || pe.Value != bad || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("Unmarshal(%q) = %v, %v; want a PlatformError naming it", bad, p, err)
		}
	}
}
