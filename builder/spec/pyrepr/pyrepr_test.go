package pyrepr

import "testing"

// The expected strings are what CPython 3.11 prints for repr() / str() of
// the same values (checked with python3 -c 'print(repr(...))').
func TestListRepr(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, "[]"},
		{[]string{"a", "b"}, "['a', 'b']"},
		{[]string{"it's"}, `["it's"]`},
		{[]string{`say "hi" it's`}, `['say "hi" it\'s']`},
		{[]string{"tab\tnl\nbs\\"}, `['tab\tnl\nbs\\']`},
		{[]string{"\x00\x7f é \u200b 😀"}, `['\x00\x7f é \u200b 😀']`},
	} {
		if got := ListRepr(tc.in); got != tc.want {
			t.Errorf("ListRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
