package pystr

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"unicode"
)

// pythonData is testdata/python.json, written by testdata/gen.py under
// Python 3.11.
type pythonData struct {
	Python string `json:"python"`
	Space  []rune `json:"space"`
	ReS    []rune `json:"re_s"`
	Cases  []struct {
		S      string `json:"s"`
		Strip  string `json:"strip"`
		LStrip string `json:"lstrip"`
		RStrip string `json:"rstrip"`
		Indent int    `json:"indent"`
	} `json:"cases"`
}

func loadPython(t *testing.T) pythonData {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "python.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d pythonData
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSpaceIsPythons holds IsSpace and SpaceClass to Python's str.isspace
// and re's \s over every code point.
func TestSpaceIsPythons(t *testing.T) {
	d := loadPython(t)
	if len(d.Space) == 0 || !slices.Equal(d.Space, d.ReS) {
		t.Fatalf("python.json: isspace %v and \\s %v (expected the same non-empty set)", d.Space, d.ReS)
	}
	class := regexp.MustCompile(`^[` + SpaceClass + `]$`)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		_, want := slices.BinarySearch(d.Space, r)
		if got := IsSpace(r); got != want {
			t.Errorf("IsSpace(%U) = %v, Python %s says %v", r, got, d.Python, want)
		}
		if r >= 0xd800 && r <= 0xdfff {
			continue // not encodable in UTF-8
		}
		if got := class.MatchString(string(r)); got != want {
			t.Errorf("SpaceClass matches %U: %v, Python %s says %v", r, got, d.Python, want)
		}
		if s := string(r); len(s) > 0 {
			sp, n := SpaceAt(s, 0)
			if sp != want || (want && n != len(s)) {
				t.Errorf("SpaceAt(%U) = %v, %d", r, sp, n)
			}
			sp, n = SpaceBefore(s, len(s))
			if sp != want || (want && n != len(s)) {
				t.Errorf("SpaceBefore(%U) = %v, %d", r, sp, n)
			}
		}
	}
}

func TestStripIsPythons(t *testing.T) {
	d := loadPython(t)
	for _, c := range d.Cases {
		if got := Strip(c.S); got != c.Strip {
			t.Errorf("Strip(%q) = %q, Python %q", c.S, got, c.Strip)
		}
		if got := LStrip(c.S); got != c.LStrip {
			t.Errorf("LStrip(%q) = %q, Python %q", c.S, got, c.LStrip)
		}
		if got := RStrip(c.S); got != c.RStrip {
			t.Errorf("RStrip(%q) = %q, Python %q", c.S, got, c.RStrip)
		}
		if got := Indent(c.S); got != c.Indent {
			t.Errorf("Indent(%q) = %d, Python %d", c.S, got, c.Indent)
		}
	}
	// Invalid UTF-8 is never space.
	if got := Strip("\xc2 x \xe3"); got != "\xc2 x \xe3" {
		t.Errorf("Strip of invalid UTF-8 = %q", got)
	}
}
