package grading

import (
	"regexp/syntax"
	"testing"
	"unicode"

	"github.com/swebuild/swebuild/internal/pystr"
)

// classRunes parses a character class of this package into its ranges.
func classRunes(t *testing.T, class string) func(rune) bool {
	t.Helper()
	re, err := syntax.Parse(class, syntax.Perl)
	if err != nil || re.Op != syntax.OpCharClass {
		t.Fatalf("%s: not a character class: %v", class, err)
	}
	return func(r rune) bool {
		for i := 0; i < len(re.Rune); i += 2 {
			if r >= re.Rune[i] && r <= re.Rune[i+1] {
				return true
			}
		}
		return false
	}
}

// TestPythonClasses ties the regexp classes to the functions the
// hand-written matchers use (both transcribed from Python 3.11), over every
// code point: \s is str.isspace(), \d is Unicode 14 Nd, [^\S\r\n] is \s
// without "\r" and "\n".
func TestPythonClasses(t *testing.T) {
	inS, inD, inNotCRLF := classRunes(t, reS), classRunes(t, reD), classRunes(t, spaceNotCRLF)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if inS(r) != pystr.IsSpace(r) {
			t.Errorf("%U: reS %v, pystr.IsSpace %v", r, inS(r), pystr.IsSpace(r))
		}
		if inD(r) != isPyDigit(r) {
			t.Errorf("%U: reD %v, isPyDigit %v", r, inD(r), isPyDigit(r))
		}
		if inNotCRLF(r) != (pystr.IsSpace(r) && r != '\r' && r != '\n') {
			t.Errorf("%U: spaceNotCRLF %v", r, inNotCRLF(r))
		}
	}
	// Spot checks from Python 3.11: "\x1c".isspace(), "\u0661".isdecimal(),
	// "\u200b" is neither.
	for _, c := range []struct {
		r            rune
		space, digit bool
	}{{'\x1c', true, false}, {'\u0661', false, true}, {'\u200b', false, false}, {'\v', true, false}, {'٣', false, true}} {
		if pystr.IsSpace(c.r) != c.space || isPyDigit(c.r) != c.digit {
			t.Errorf("%U: space %v digit %v", c.r, pystr.IsSpace(c.r), isPyDigit(c.r))
		}
	}
}

// TestPyWord: isPyWord's exceptions were computed against Go's Unicode
// 15.0.0 tables; a Go release with newer tables must recompute them.
func TestPyWord(t *testing.T) {
	if unicode.Version != goUnicodeVersion {
		t.Fatalf("Go's unicode tables are %s; isPyWord's exception list is for %s: recompute it (every code point where Python 3.11's re \\w and Go's L|N|_ differ)",
			unicode.Version, goUnicodeVersion)
	}
	// Python 3.11: "é".isalnum(), "٣".isalnum(), "½".isalnum() (No),
	// not "-", "✔", U+11F50 (Kawi digit, Unicode 15).
	for _, c := range []struct {
		r    rune
		want bool
	}{{'_', true}, {'a', true}, {'Z', true}, {'7', true}, {'é', true}, {'٣', true}, {'½', true},
		{'-', false}, {' ', false}, {'✔', false}, {0x11f50, false}, {0x1e4f0, false}, {0x1e4ef, false}} {
		if isPyWord(c.r) != c.want {
			t.Errorf("isPyWord(%U) = %v, want %v", c.r, !c.want, c.want)
		}
	}
}
