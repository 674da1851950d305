package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

// PEM block types of cosign's key files.
const (
	// PrivateKeyPEMType is the block of cosign.key as cosign v2/v3
	// generate-key-pair writes it; CosignPrivateKeyPEMType the older name
	// cosign still reads.
	PrivateKeyPEMType       = "ENCRYPTED SIGSTORE PRIVATE KEY"
	CosignPrivateKeyPEMType = "ENCRYPTED COSIGN PRIVATE KEY"
	PublicKeyPEMType        = "PUBLIC KEY"
)

// Key file names, as cosign generate-key-pair names them.
const (
	PrivateKeyFile = "cosign.key"
	PublicKeyFile  = "cosign.pub"
)

// GenerateKey makes an ECDSA P-256 key, the algorithm cosign and Sigstore
// default to (PKIX_ECDSA_P256_SHA_256).
func GenerateKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating an ECDSA P-256 key: %w", err)
	}
	return k, nil
}

// EncodePrivateKey returns key as cosign.key: PKCS #8 sealed with password
// (scrypt, then NaCl secretbox; an empty password is allowed, as cosign
// allows it) in a PEM block of PrivateKeyPEMType.
func EncodePrivateKey(key *ecdsa.PrivateKey, password []byte) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the private key: %w", err)
	}
	sealed, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, fmt.Errorf("encrypting the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PrivateKeyPEMType, Bytes: sealed}), nil
}

// DecodePrivateKey reads a cosign.key (either PEM block name) sealed with
// password. Only ECDSA P-256 keys are accepted.
func DecodePrivateKey(data, password []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block (want " + PrivateKeyPEMType + ")")
	}
	if b.Type != PrivateKeyPEMType && b.Type != CosignPrivateKeyPEMType {
		return nil, fmt.Errorf("PEM block %q, want %s", b.Type, PrivateKeyPEMType)
	}
	der, err := encrypted.Decrypt(b.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("decrypting the private key (wrong password?): %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the private key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the private key is a %s, want ECDSA P-256", keyKind(k))
	}
	return ek, nil
}

// EncodePublicKey returns pub as cosign.pub (PKIX, PEM "PUBLIC KEY").
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PublicKeyPEMType, Bytes: der}), nil
}

// DecodePublicKey reads a cosign.pub. Only ECDSA P-256 keys are accepted.
func DecodePublicKey(data []byte) (*ecdsa.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block (want " + PublicKeyPEMType + ")")
	}
	if b.Type != PublicKeyPEMType {
		return nil, fmt.Errorf("PEM block %q, want %s", b.Type, PublicKeyPEMType)
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the public key: %w", err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, fmt.Errorf("the public key is a %s, want ECDSA P-256", keyKind(k))
	}
	return ek, nil
}

func keyKind(k any) string {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return "ECDSA " + k.Curve.Params().Name + " key"
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name + " key"
	default:
		return fmt.Sprintf("%T", k)
	}
}

// KeyID is the key's fingerprint: hex SHA-256 of its PKIX DER, the first 16
// hex digits (what messages name a key by).
func KeyID(pub crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "unknown key"
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// KeyPairFiles are the two files of a key pair in a directory.
type KeyPairFiles struct{ Private, Public string }

// WriteKeyPair makes a key (GenerateKey) and writes DIR/cosign.key (mode
// 0600, sealed with password) and DIR/cosign.pub (0644), creating dir
// (0700). Existing files are never overwritten: a key pair already there is
// an error naming it.
func WriteKeyPair(dir string, password []byte) (KeyPairFiles, error) {
	f := KeyPairFiles{Private: filepath.Join(dir, PrivateKeyFile), Public: filepath.Join(dir, PublicKeyFile)}
	for _, p := range []string{f.Private, f.Public} {
		if _, err := os.Lstat(p); err == nil {
			return f, fmt.Errorf("%s already exists: a key pair is never overwritten (remove it first to make a new one)", p)
		}
	}
	key, err := GenerateKey()
	if err != nil {
		return f, err
	}
	priv, err := EncodePrivateKey(key, password)
	if err != nil {
		return f, err
	}
	pub, err := EncodePublicKey(&key.PublicKey)
	if err != nil {
		return f, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("making the key directory: %w", err)
	}
	if err := writeNew(f.Private, priv, 0o600); err != nil {
		return f, err
	}
	if err := writeNew(f.Public, pub, 0o644); err != nil {
		_ = os.Remove(f.Private)
		return f, err
	}
	return f, nil
}

// writeNew writes data to a new file path (O_EXCL) with mode perm, then
// sets perm again (the umask may have narrowed or, for 0600, not mattered).
func writeNew(path string, data []byte, perm os.FileMode) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		_ = os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(path, perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadPrivateKey reads and decrypts a cosign.key file.
func ReadPrivateKey(path string, password []byte) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key: %w", err)
	}
	k, err := DecodePrivateKey(data, password)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return k, nil
}

// ReadPublicKey reads a cosign.pub file.
func ReadPublicKey(path string) (*ecdsa.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the public key: %w", err)
	}
	k, err := DecodePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return k, nil
}
