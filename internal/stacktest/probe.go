package stacktest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probeTimeout bounds one probe of one part of the stack.
const probeTimeout = 10 * time.Second

// probes remembers each probe's answer for the life of the test binary: the
// first test that needs a part asks it, the others reuse the answer.
var probes = struct {
	sync.Mutex
	done map[string]error
}{done: map[string]error{}}

// probeOnce runs probe for key once per test binary and returns its answer.
func probeOnce(key string, probe func(ctx context.Context) error) error {
	probes.Lock()
	defer probes.Unlock()
	if err, ok := probes.done[key]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	err := probe(ctx)
	probes.done[key] = err
	return err
}

// probeBuildKit asks the BuildKit daemon at addr (unix:///PATH or
// tcp://HOST:PORT, as BUILDKIT_HOST names it) for its gRPC health, which
// buildkitd serves: an answer SERVING means the daemon is up and answering,
// not only that a socket file or a variable exists.
func probeBuildKit(ctx context.Context, addr string) error {
	target, err := grpcTarget(addr)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting to BuildKit at %s: %w", addr, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("asking BuildKit at %s for its health: %w", addr, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("BuildKit at %s: health %s, want SERVING", addr, s)
	}
	return nil
}

// grpcTarget turns a BuildKit address into a gRPC dial target. Only the
// schemes the local stack uses are probed (plain unix and tcp).
func grpcTarget(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("BuildKit address %q: %w", addr, err)
	}
	switch {
	case u.Scheme == "unix" && u.Path != "":
		return "unix://" + u.Path, nil
	case u.Scheme == "tcp" && u.Host != "" && u.RawQuery == "":
		return "passthrough:///" + u.Host, nil
	}
	return "", fmt.Errorf("BuildKit address %q: stacktest probes unix:///PATH and plain tcp://HOST:PORT (the local stack's kinds) only", addr)
}

// probeRegistry asks the registry at host (host:port, plain HTTP) for /v2/
// and wants status want: 200 from an open registry, 401 from one that
// requires a login.
func probeRegistry(ctx context.Context, host string, want int) error {
	return probeHTTP(ctx, http.DefaultTransport, "http://"+host+"/v2/", "", want)
}

// probeLogin asks the login registry at host for /v2/ twice: without
// credentials it must refuse (401), with the login config.json in
// dockerConfig holds for it (as docker login writes it: auths[host].auth) it
// must answer 200.
func probeLogin(ctx context.Context, host, dockerConfig string) error {
	if err := probeRegistry(ctx, host, http.StatusUnauthorized); err != nil {
		return err
	}
	path := filepath.Join(dockerConfig, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the login for %s: %w", host, err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	auth := cfg.Auths[host].Auth
	if auth == "" {
		return fmt.Errorf("%s: no auths[%q].auth (scripts/stack.sh up writes it)", path, host)
	}
	if _, err := base64.StdEncoding.DecodeString(auth); err != nil {
		return fmt.Errorf("%s: auths[%q].auth: %w", path, host, err)
	}
	return probeHTTP(ctx, http.DefaultTransport, "http://"+host+"/v2/", "Basic "+auth, http.StatusOK)
}

// probeDocker asks the Docker daemon at addr (unix:///PATH or
// tcp://HOST:PORT) for /_ping, which answers 200 OK.
func probeDocker(ctx context.Context, addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("Docker address %q: %w", addr, err)
	}
	tr := http.DefaultTransport
	base := "http://" + u.Host
	switch {
	case u.Scheme == "unix" && u.Path != "":
		sock := u.Path
		tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		base = "http://docker"
	case u.Scheme == "tcp" && u.Host != "":
	default:
		return fmt.Errorf("Docker address %q: want unix:///PATH or tcp://HOST:PORT", addr)
	}
	return probeHTTP(ctx, tr, base+"/_ping", "", http.StatusOK)
}

func probeHTTP(ctx context.Context, tr http.RoundTripper, u, authorization string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != want {
		what := ""
		if authorization != "" {
			what = " with the login"
		}
		return fmt.Errorf("GET %s%s: %s, want %d %s", u, what, resp.Status, want, http.StatusText(want))
	}
	return nil
}

// unset names those of vars that are empty, as "A and B", or "".
func unset(vars ...[2]string) string {
	var names []string
	for _, v := range vars {
		if v[1] == "" {
			names = append(names, v[0])
		}
	}
	return strings.Join(names, " and ")
}
