package govalidator

import "testing"

// The real govalidator (v0.0.0-20230301143203-a9d515a09cc2, the version
// go.mod replaces) gives the same answer for every case: run there, this
// table passes too.
func TestIsEmail(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"foo@bar.com", true},
		{"x@x.x", true},
		{"foo@bar.com.au", true},
		{"foo+bar@bar.com", true},
		{"foo.bar@bar.com", true},
		{"keyless@projectsigstore.iam.gserviceaccount.com", true},
		{"", false},
		{"invalidemail@", false},
		{"invalid.com", false},
		{"@invalid.com", false},
		{"foo@bar", false},
		{"Foo Bar <foo@bar.com>", false},
		{"<foo@bar.com>", false},
		{"foo@bar.com ", false},
		{"https://github.com/org/repo/.github/workflows/nightly.yml@refs/heads/main", false},
	} {
		if got := IsEmail(c.in); got != c.want {
			t.Errorf("IsEmail(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}
