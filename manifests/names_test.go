package manifests

import (
	"errors"
	"strings"
	"testing"

	"github.com/distribution/reference"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		repo, id, arch, archRepo, indexRepo string
	}{
		{"127.0.0.1:5000/swebench", "django__django-11099", "x86_64", "127.0.0.1:5000/swebench/sweb.eval.x86_64.django_1776_django-11099", "127.0.0.1:5000/swebench/sweb.eval.django_1776_django-11099"},
		{"ghcr.io/org/", "Psf__Requests-2317", "arm64", "ghcr.io/org/sweb.eval.arm64.psf_1776_requests-2317", "ghcr.io/org/sweb.eval.psf_1776_requests-2317"},
		{"r", "a___b", "arm64", "r/sweb.eval.arm64.a_1776__b", "r/sweb.eval.a_1776__b"},
	} {
		n := Namer{Repo: tc.repo}
		if got := n.ArchRepo(tc.arch, tc.id); got != tc.archRepo {
			t.Errorf("ArchRepo(%s, %s) = %q, want %q", tc.arch, tc.id, got, tc.archRepo)
		}
		if got := n.IndexRepo(tc.id); got != tc.indexRepo {
			t.Errorf("IndexRepo(%s) = %q, want %q", tc.id, got, tc.indexRepo)
		}
	}
}

func TestContentTag(t *testing.T) {
	// sha256("abc\n") = edeaaff3f1774ad2888673770c6d64097e391bc362d7d6fb34982ddf0efd18cb
	if got := ContentTag("abc"); got != "k-edeaaff3f177" {
		t.Errorf("ContentTag(abc) = %q", got)
	}
	if ContentTag("a", "b") != ContentTag("b", "a") {
		t.Error("ContentTag depends on key order")
	}
	if ContentTag("a") == ContentTag("a-pinned") {
		t.Error("changed key, same tag")
	}
	if len(ContentTag("x")) != 14 {
		t.Errorf("tag length %d", len(ContentTag("x")))
	}
}

func TestValidateID(t *testing.T) {
	long := func(n int) string { return "a" + strings.Repeat("b", n-1) }
	for _, tc := range []struct {
		id   string
		want string // substring of the reason; "" means valid
	}{
		{"django__django-11099", ""},
		{"Psf__Requests-2317", ""},
		{"chartjs__Chart.js-11116", ""},
		{"a--b", ""},
		{"a_b.c-d", ""},
		{long(MaxNameIDLen), ""},
		{"", "is empty"},
		{"a/b", "outside [A-Za-z0-9._-] at byte 1"},
		{"a b", "outside [A-Za-z0-9._-] at byte 1"},
		{"acmé", "outside [A-Za-z0-9._-] at byte 3"},
		{"-rf", `starts with '-'`},
		{".hidden", `starts with '.'`},
		{"_x", `starts with '_'`},
		{"widget-", `ends with '-'`},
		{"widget.", `ends with '.'`},
		{"widget_", `ends with '_'`},
		{"a..b", `contains ".."`},
		{"a.-b", `has ".-" at byte 1`},
		{"a_-1", `has "_-" at byte 1`},
		{"a___b", `has "___" at byte 1`},
		{"a-.b", `has "-." at byte 1`},
		{long(MaxNameIDLen + 1), "is 129 bytes in image names"},
		// 102 bytes, but each of the 25 "__" becomes "_1776_": 202 bytes.
		{strings.Repeat("ab__", 25) + "ab", "is 202 bytes in image names"},
		{long(300), "over the limit"},
	} {
		err := ValidateID(tc.id)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ValidateID(%q) = %v, want nil", tc.id, err)
			}
			continue
		}
		var ie *IDError
		if !errors.As(err, &ie) || !strings.Contains(ie.Reason, tc.want) || ie.ID != tc.id {
			t.Errorf("ValidateID(%q) = %v, want a reason containing %q", tc.id, err, tc.want)
		}
	}
}

func TestCollisions(t *testing.T) {
	ids := []string{"a__x-1", "b-2", "A__X-1", "a_1776_x-1", "b-2", "c-3"}
	got := Namer{}.Collisions(ids)
	want := []Collision{{First: 0, Second: 2, NameID: "a_1776_x-1"}, {First: 0, Second: 3, NameID: "a_1776_x-1"}, {First: 1, Second: 4, NameID: "b-2"}}
	if len(got) != len(want) {
		t.Fatalf("Collisions = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("collision %d = %v, want %v", i, got[i], want[i])
		}
	}
	// Without the "__" mapping, only case still collides.
	keep := Namer{KeepDoubleUnderscore: true}.Collisions(ids)
	if len(keep) != 2 || keep[0] != (Collision{First: 0, Second: 2, NameID: "a__x-1"}) || keep[1].Second != 4 {
		t.Errorf("KeepDoubleUnderscore collisions = %v", keep)
	}
	err := Namer{}.CheckCollisions(ids)
	if err == nil {
		t.Fatal("CheckCollisions: nil")
	}
	for _, w := range []string{`"a__x-1" and "A__X-1"`, `"a__x-1" and "a_1776_x-1"`, `"b-2" appears twice`, "sweb.eval.a_1776_x-1"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("CheckCollisions error %q lacks %q", err, w)
		}
	}
	if err := (Namer{}).CheckCollisions([]string{"a-1", "b-1", "a_1"}); err != nil {
		t.Errorf("distinct names: %v", err)
	}
}

// TestValidateIDMatchesReferenceGrammar holds ValidateID to the registry's
// own parser, distribution/reference: every id of up to 6 characters over
// letters of both cases, a digit and the three separators is valid exactly
// when both of its image names (with and without "__" -> "_1776_") parse.
func TestValidateIDMatchesReferenceGrammar(t *testing.T) {
	alphabet := []byte("aB0._-")
	n := 0
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		if len(prefix) > 0 {
			n++
			id := string(prefix)
			parses := true
			for _, namer := range []Namer{{}, {KeepDoubleUnderscore: true}} {
				if _, err := reference.WithName("sweb.eval.x86_64." + namer.NameID(id)); err != nil {
					parses = false
				}
			}
			if err := ValidateID(id); (err == nil) != parses {
				t.Errorf("ValidateID(%q) = %v, reference grammar accepts: %v", id, err, parses)
			}
		}
		if len(prefix) == 6 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	if n != 55986 {
		t.Errorf("checked %d ids", n)
	}
}

func BenchmarkValidateID(b *testing.B) {
	ids := []string{"django__django-11099", "Psf__Requests-2317", "scikit-learn__scikit-learn-13142", "sphinx-doc__sphinx-8721"}
	b.ReportAllocs()
	for b.Loop() {
		for _, id := range ids {
			if err := ValidateID(id); err != nil {
				b.Fatal(err)
			}
		}
	}
}
