package grading

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestMinitestMatchesRegexp compares the hand matcher with Go's regexp of
// upstream's pattern (same leftmost-first, greedy-first submatches as
// Python's re for a pattern without backreferences) on random lines made of
// the characters the pattern cares about.
func TestMinitestMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(`^(.+)\. .*=.*(\.|F|E).*$`)
	rng := rand.New(rand.NewPCG(19, 20))
	alphabet := []string{".", " ", "=", "F", "E", "S", "a", ". ", "= ", "é"}
	for i := 0; i < 200000; i++ {
		var b strings.Builder
		for n := rng.IntN(14); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		line := b.String()
		name, outcome, ok := minitestMatch(line)
		m := re.FindStringSubmatch(line)
		if (m != nil) != ok || ok && (m[1] != name || m[2] != string(outcome)) {
			t.Fatalf("line %q: got %q %q %v, regexp %q", line, name, outcome, ok, m)
		}
	}
}

// TestMinitestLongLine: issue 20 row 9. A 4 MiB "--- FAIL:" line of ". "
// pairs with no "=" took upstream's regexp 18 s, and the matcher that tried
// each ". " in turn with a scan of the rest is quadratic too (measured on
// the shared VM: 0.21 s at 128 KiB, 0.85 s at 256 KiB, 2.2 s at 512 KiB, so
// about 2.3 min at 4 MiB); the linear matcher reads it a few times. The same line
// with one "=" near its start is a match whose name runs to the last ". "
// before that "=".
func TestMinitestLongLine(t *testing.T) {
	body := strings.Repeat("a. ", 4<<20/3)
	for _, c := range []struct {
		line, name string
		status     string
	}{
		{"--- FAIL: " + body + "x.", "", ""},
		{"--- FAIL: t. k=v " + body + "E", "--- FAIL: t", StatusFailed},
	} {
		sm := NewStatusMap()
		if err := parseMinitest(c.line+"\n", sm); err != nil {
			t.Fatal(err)
		}
		if c.name == "" {
			if sm.Len() != 0 {
				t.Errorf("no-match line gave %d entries", sm.Len())
			}
			continue
		}
		if st, ok := sm.Get(c.name); !ok || st != c.status || sm.Len() != 1 {
			t.Errorf("got %d entries, %q = %q; want %q = %q", sm.Len(), c.name, st, c.name, c.status)
		}
	}
}
