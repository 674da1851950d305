package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/swebuild/swebuild/sign"
)

// envSigningPassword is the variable holding the password of cosign.key:
// cosign's own, so that one setting serves both tools.
const envSigningPassword = "COSIGN_PASSWORD"

// runSign dispatches `swebuild sign keygen`.
func runSign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runGroup(ctx, "sign", "Signing keys for the statements swebuild attaches (Sigstore bundles cosign v3 verifies).", "keygen",
		[]command{{"keygen", "make an ECDSA P-256 key pair as cosign.key and cosign.pub", runSignKeygen}}, args, stdout, stderr)
}

func runSignKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sign keygen", stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: swebuild sign keygen --out DIR\n\n"+
			"Make an ECDSA P-256 key pair in cosign's files: DIR/cosign.key (mode 0600, sealed with the\n"+
			"password in $%s, empty when unset, as cosign generate-key-pair writes it) and\n"+
			"DIR/cosign.pub. An existing key pair is never overwritten. A consumer verifies with\n"+
			"cosign verify-attestation --key cosign.pub --insecure-ignore-tlog=true (docs/consume.md).\n\nOptions:\n", envSigningPassword)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "directory for cosign.key and cosign.pub (made 0700 when missing)")
	if done, err := parseFlags(fs, args, false, stdout, stderr); done {
		return err
	}
	if err := requireFlags(fs, stderr, requiredFlag{name: "out"}); err != nil {
		return err
	}
	password, set := os.LookupEnv(envSigningPassword)
	if !set {
		fmt.Fprintf(stderr, "swebuild sign keygen: %s is unset: cosign.key is sealed with an empty password\n", envSigningPassword)
	}
	files, err := sign.WriteKeyPair(*out, []byte(password))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "private key: %s\npublic key: %s\n", files.Private, files.Public)
	return nil
}
