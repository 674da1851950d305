package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/regtest"
	"github.com/swebuild/swebuild/sign"
)

// TestCheckCLI runs `swebuild check` on the offline fixture against an
// empty registry (in-process: the registry is not what is tested): every
// reference is a gap (20: 7 indexes, 7 amd64 names, 6 arm64 names,
// fixture__textutil-2 being x86-only), the command fails, and --digests
// still writes one line per instance. The
// all-present and deleted-manifest cases are check's own test
// (TestCheckRealRegistry).
func TestCheckCLI(t *testing.T) {
	t.Setenv(envSigningKey, "")
	reg := regtest.InProcess(t)
	root := filepath.Join("..", "..", "testdata", "fixture")
	digests := filepath.Join(t.TempDir(), "digests.jsonl")
	var stdout, stderr bytes.Buffer
	err := runCheck(context.Background(), []string{"--dataset", filepath.Join(root, "dataset.jsonl"), "--specs", filepath.Join(root, "specs.json"),
		"--repo", reg.Host + "/demo", "--offline", "--cache-dir", t.TempDir(), "--digests", digests, "--unsigned"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "20 of 20 images missing") {
		t.Fatalf("err %v; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "0/20 images present (7 instances)") ||
		strings.Contains(stdout.String(), "sweb.eval.arm64.fixture_1776_textutil-2") ||
		!strings.Contains(stdout.String(), reg.Host+"/demo/sweb.eval.fixture_1776_textutil-2:latest\tmissing") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	b, err := os.ReadFile(digests)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 7 || !strings.HasPrefix(string(b), `{"instance_id":"fixture__calc-1","platforms":{}}`) {
		t.Errorf("digests file (%d lines):\n%s", n, b)
	}
	if err := runCheck(context.Background(), []string{"--dataset", "x.jsonl"}, &stdout, &stderr); err != errUsage {
		t.Errorf("no --repo: %v", err)
	}
}

// TestCheckDigestCatalogSigned: check --digests FILE --signing-key KEY
// writes FILE.sigstore.json; check --verify-digests FILE --key PUB accepts
// it and says what it lists (dataset, repository, counts), and refuses
// the catalog changed by one byte and another key's public key. Without a
// signing choice, --digests is refused naming the three; the trust flags
// are refused where they mean nothing.
func TestCheckDigestCatalogSigned(t *testing.T) {
	t.Setenv(envSigningKey, "")
	t.Setenv(envSigningPassword, "")
	reg := regtest.Start(t, regtest.Options{})
	root := filepath.Join("..", "..", "testdata", "fixture")
	dir := t.TempDir()
	keys, err := sign.WriteKeyPair(filepath.Join(dir, "keys"), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sign.WriteKeyPair(filepath.Join(dir, "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	digests := filepath.Join(dir, "digests.jsonl")
	base := []string{"--dataset", filepath.Join(root, "dataset.jsonl"), "--specs", filepath.Join(root, "specs.json"),
		"--repo", reg.Host + "/demo", "--offline", "--cache-dir", t.TempDir(), "--digests", digests}
	var stdout, stderr bytes.Buffer
	err = runCheck(context.Background(), base, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "check --digests signs the catalog it writes: give --signing-key FILE") || !strings.Contains(err.Error(), "--unsigned") {
		t.Fatalf("--digests with no signing choice: %v", err)
	}
	stdout.Reset()
	err = runCheck(context.Background(), append(base, "--signing-key", keys.Private), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "20 of 20 images missing") {
		t.Fatalf("err %v; stdout:\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "digest catalog "+digests+" signed by key ") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	verifyWith := func(pub string) (string, error) {
		var so, se bytes.Buffer
		err := runCheck(context.Background(), []string{"--verify-digests", digests, "--key", pub}, &so, &se)
		return so.String(), err
	}
	out, err := verifyWith(keys.Public)
	want := digests + ": signed by key "
	if err != nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "the digest catalog of "+filepath.Join(root, "dataset.jsonl")+" in "+reg.Host+"/demo:latest, 7 instances, 0/20 references present, not gated") {
		t.Fatalf("--verify-digests: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
	if _, err := verifyWith(other.Public); err == nil || !strings.Contains(err.Error(), "does not verify with key") {
		t.Errorf("another key: %v", err)
	}
	b, _ := os.ReadFile(digests)
	b[10] ^= 1
	if err := os.WriteFile(digests, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verifyWith(keys.Public); err == nil || !strings.Contains(err.Error(), "the file is not the one signed") {
		t.Errorf("a catalog changed by one byte: %v", err)
	} else {
		t.Log(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", "x.jsonl", "--repo", "r", "--require-verified"}, "give --key PUB"},
		{[]string{"--dataset", "x.jsonl", "--repo", "r", "--key", keys.Public}, "with --require-verified or --verify-digests"},
		{[]string{"--verify-digests", digests, "--repo", "r", "--key", keys.Public}, "--verify-digests checks a catalog file alone"},
		{[]string{"--dataset", "x.jsonl", "--repo", "r", "--require-verified", "--key", keys.Public, "--certificate-identity", "x"}, "give a key or a certificate identity"},
		{[]string{"--dataset", "x.jsonl", "--repo", "r", "--require-verified", "--certificate-identity", "x"}, "--certificate-oidc-issuer"},
	} {
		var so, se bytes.Buffer
		if err := runCheck(context.Background(), tc.args, &so, &se); err != errUsage || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: %v, %q; want a usage error saying %q", tc.args, err, se.String(), tc.want)
		}
	}
}
