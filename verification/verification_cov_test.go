package verification

import "testing"

func TestVerdictDigest(t *testing.T) {
	const dg = "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	cases := []struct{ image, want string }{
		{"127.0.0.1:5000/swebuild/sweb.eval.django__django-11099@" + dg, dg},
		{"ghcr.io/o/sweb.eval.x:latest@" + dg, dg},
		{"ghcr.io/o/sweb.eval.x:latest", ""},
		{"", ""},
	}
	for _, c := range cases {
		if got := (Verdict{Image: c.image}).Digest(); got != c.want {
			t.Errorf("Verdict{Image: %q}.Digest() = %q, want %q", c.image, got, c.want)
		}
	}
}

// TestGradingVersion: the releases are upstream's (SWE-bench v5.0.2 and
// v4.1.0, the two graders of ../shared/swebench-reference).
func TestGradingVersion(t *testing.T) {
	cases := []struct{ rules, want string }{
		{"v5", "SWE-bench 5.0.2"},
		{"v4.1", "SWE-bench 4.1.0"},
		{"auto", "SWE-bench 5.0.2 for records with log_parser, else 4.1.0"},
		{"", ""},
		{"v4", ""},
		{"V5", ""},
	}
	for _, c := range cases {
		if got := GradingVersion(c.rules); got != c.want {
			t.Errorf("GradingVersion(%q) = %q, want %q", c.rules, got, c.want)
		}
	}
}
