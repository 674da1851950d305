package regtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The token realm: distribution's token authentication (auth: token) with
// a token server of the test's own on another port of 127.0.0.1, as a
// registry behind Docker's, Harbor's or GHCR's token service is. The server
// takes a Basic login (Options.User, Password) and issues JWTs signed with
// an ES256 key whose self-signed certificate is the registry's
// rootcertbundle (the x5c header carries it, which distribution 2.8
// verifies against the bundle); a token grants the scope asked for.

const (
	tokenService = "regtest"
	tokenIssuer  = "regtest-token-server"
)

// tokenServer is a running token server.
type tokenServer struct {
	key  *ecdsa.PrivateKey
	cert []byte // DER
	user string
	pass string
	url  string
}

// startTokenServer starts a token server on a free port and writes its
// certificate to dir/token.pem; it returns the server and the config
// lines of the registry's auth section.
func startTokenServer(tb testing.TB, dir, user, pass string) (*tokenServer, string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("regtest: token key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: tokenIssuer},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("regtest: token certificate: %v", err)
	}
	pemPath := filepath.Join(dir, "token.pem")
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		tb.Fatalf("regtest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("regtest: token server: %v", err)
	}
	ts := &tokenServer{key: key, cert: der, user: user, pass: pass, url: "http://" + ln.Addr().String() + "/token"}
	srv := &http.Server{Handler: http.HandlerFunc(ts.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	cfg := fmt.Sprintf("auth:\n  token:\n    realm: %s\n    service: %s\n    issuer: %s\n    rootcertbundle: %s\n", ts.url, tokenService, tokenIssuer, pemPath)
	return ts, cfg
}

// serve answers GET /token?service=...&scope=... for a right Basic login
// (an anonymous one when the server has no user).
func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); ts.user != "" && (!ok || u != ts.user || p != ts.pass) {
		w.Header().Set("WWW-Authenticate", `Basic realm="regtest-token"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad login"}]}`, http.StatusUnauthorized)
		return
	}
	var access []map[string]any
	for _, sc := range r.URL.Query()["scope"] {
		// repository:NAME:ACTION[,ACTION]; NAME may hold ':' only as a port
		// in other schemes, never here.
		parts := strings.SplitN(sc, ":", 3)
		if len(parts) != 3 {
			continue
		}
		access = append(access, map[string]any{"type": parts[0], "name": parts[1], "actions": strings.Split(parts[2], ",")})
	}
	tok, err := ts.sign(access)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "access_token": tok, "expires_in": 600})
}

// sign makes a JWT for access, signed ES256 with the certificate in x5c.
func (ts *tokenServer) sign(access []map[string]any) (string, error) {
	now := time.Now()
	header := map[string]any{"typ": "JWT", "alg": "ES256", "x5c": []string{base64.StdEncoding.EncodeToString(ts.cert)}}
	claims := map[string]any{"iss": tokenIssuer, "sub": ts.user, "aud": tokenService, "exp": now.Add(10 * time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "iat": now.Unix(), "jti": fmt.Sprint(now.UnixNano()), "access": access}
	enc := func(v any) (string, error) {
		b, err := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b), err
	}
	h, err := enc(header)
	if err != nil {
		return "", err
	}
	c, err := enc(claims)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(h + "." + c))
	r, s, err := ecdsa.Sign(rand.Reader, ts.key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return h + "." + c + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
