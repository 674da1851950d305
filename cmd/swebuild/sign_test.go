package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/sign"
)

func TestSignKeygen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "signing")
	t.Setenv("COSIGN_PASSWORD", "s3cret")
	var out, errb bytes.Buffer
	if code := run([]string{"sign", "keygen", "--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	priv, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if want := "private key: " + priv + "\npublic key: " + pub + "\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	st, err := os.Stat(priv)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cosign.key: %v, mode %v", err, st.Mode())
	}
	k, err := sign.ReadPrivateKey(priv, []byte("s3cret"))
	if err != nil {
		t.Fatalf("cosign.key does not open with $COSIGN_PASSWORD: %v", err)
	}
	p, err := sign.ReadPublicKey(pub)
	if err != nil || !k.PublicKey.Equal(p) {
		t.Fatalf("cosign.pub: %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"sign", "keygen", "--out", dir}, 1, priv + " already exists"},
		{[]string{"sign", "keygen"}, 2, "--out is required"},
		{[]string{"sign", "keygen", "--out", dir, "extra"}, 2, "extra"},
		{[]string{"sign", "keys"}, 2, `unknown command "keys"`},
	} {
		out.Reset()
		errb.Reset()
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("swebuild %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, errb.String(), tc.code, tc.err)
		}
	}
}
