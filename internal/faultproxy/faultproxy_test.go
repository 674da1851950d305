package faultproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        Kind
	}{
		{"GET", "/v2/", KindPing},
		{"HEAD", "/v2/a/b/blobs/sha256:1", KindBlobHead},
		{"GET", "/v2/a/blobs/sha256:1", KindBlobGet},
		{"POST", "/v2/a/blobs/uploads/", KindUploadPost},
		{"POST", "/v2/a/blobs/uploads/?mount=sha256:1&from=b", KindMountPost},
		{"PATCH", "/v2/a/blobs/uploads/uuid?_state=x", KindUploadPatch},
		{"PUT", "/v2/a/blobs/uploads/uuid?digest=sha256:1", KindUploadPut},
		{"HEAD", "/v2/a/manifests/latest", KindManifestHead},
		{"GET", "/v2/a/manifests/sha256:1", KindManifestGet},
		{"PUT", "/v2/a/manifests/k-1", KindManifestPut},
		{"DELETE", "/v2/a/manifests/k-1", KindOther},
	} {
		u, _ := url.Parse(tc.url)
		if got := Classify(tc.method, u); got != tc.want {
			t.Errorf("%s %s = %s, want %s", tc.method, tc.url, got, tc.want)
		}
	}
}

// Faults are injected at about the configured rate, the same seed gives the
// same sequence, upload bodies and completed uploads are counted, and a
// faulted request never reaches the upstream.
func TestProxyFaultsAndCounters(t *testing.T) {
	var upstreamHits int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamHits++
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer up.Close()
	host := strings.TrimPrefix(up.URL, "http://")

	run := func(seed int64) ([]int, Stats) {
		p := Start(t, host, Config{Seed: seed, Rate429: 0.1, Rate500: 0.1, Rate503: 0.1, RateReset: 0.1})
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		var codes []int
		for i := 0; i < 200; i++ {
			req, _ := http.NewRequest(http.MethodPut, "http://"+p.Host+"/v2/r/blobs/uploads/u?digest=sha256:abc", bytes.NewReader(make([]byte, 100)))
			resp, err := client.Do(req)
			if err != nil {
				codes = append(codes, -1)
				continue
			}
			if resp.StatusCode == 429 || resp.StatusCode == 503 {
				if resp.Header.Get("Retry-After") != "1" {
					t.Errorf("%d without Retry-After", resp.StatusCode)
				}
			}
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		return codes, p.Stats()
	}
	upstreamHits = 0
	a, st := run(42)
	b, _ := run(42)
	if len(a) != len(b) {
		t.Fatal("lengths differ")
	}
	same := true
	for i := range a {
		same = same && a[i] == b[i]
	}
	if !same {
		t.Error("same seed, different fault sequence")
	}
	faults := 0
	for _, n := range st.Faults {
		faults += n
	}
	if faults < 50 || faults > 110 {
		t.Errorf("%d faults in 200 requests at 40%%", faults)
	}
	ok := 0
	for _, c := range a {
		if c == http.StatusCreated {
			ok++
		}
	}
	if st.CompletedUploads["sha256:abc"] != ok || st.Forwarded[KindUploadPut] != ok || st.UploadBodyBytes != int64(100*ok) {
		t.Errorf("counters %+v vs %d successes", st, ok)
	}
	if st.Faults["reset"] == 0 {
		t.Error("no resets injected")
	}
	if upstreamHits != 2*ok {
		t.Errorf("upstream saw %d requests, %d succeeded", upstreamHits, 2*ok)
	}
}

func TestStartRefusesNonLoopbackUpstream(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		Start(ft, "example.com:80", Config{})
	}()
	if !ft.failed {
		t.Error("non-loopback upstream accepted")
	}
}

type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
func (f *fatalRecorder) Helper()               {}

// The faults after the registry acted: the upstream gets every request
// whole, and the client gets a 5xx (lost), a reset with no answer
// (lost-reset), or the status, headers and part of the body (cut-body). A
// commit PUT is counted per digest whatever the answer.
func TestFaultsAfterTheRegistryActed(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 10000)
	var hits, bodyBytes int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		hits++
		bodyBytes += int(n)
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.Header().Set("Content-Length", "10000")
		w.Write(body)
	}))
	defer up.Close()
	host := strings.TrimPrefix(up.URL, "http://")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	for _, tc := range []struct {
		name string
		cfg  Config
		// what the client sees
		check func(t *testing.T, resp *http.Response, err error)
	}{
		{"lost", Config{RateLost: 1}, func(t *testing.T, resp *http.Response, err error) {
			if err != nil || resp.StatusCode < 500 {
				t.Fatalf("want a 5xx, got %v %v", resp, err)
			}
		}},
		{"lost-reset", Config{RateLostReset: 1}, func(t *testing.T, resp *http.Response, err error) {
			if err == nil {
				t.Fatalf("want a connection error, got %d", resp.StatusCode)
			}
		}},
		{"cut-body", Config{RateCutBody: 1}, func(t *testing.T, resp *http.Response, err error) {
			if err != nil {
				t.Fatalf("want headers, got %v", err)
			}
			if resp.StatusCode != http.StatusOK || resp.ContentLength != 10000 {
				t.Fatalf("status %d, length %d", resp.StatusCode, resp.ContentLength)
			}
			b, err := io.ReadAll(resp.Body)
			if err == nil || len(b) == 0 || len(b) >= 10000 {
				t.Fatalf("read %d bytes, err %v: want part of the body and an error", len(b), err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, bodyBytes = 0, 0
			p := Start(t, host, tc.cfg)
			resp, err := client.Get("http://" + p.Host + "/v2/r/blobs/sha256:abc")
			tc.check(t, resp, err)
			if resp != nil {
				resp.Body.Close()
			}
			req, _ := http.NewRequest(http.MethodPut, "http://"+p.Host+"/v2/r/blobs/uploads/u?digest=sha256:abc", bytes.NewReader(make([]byte, 300)))
			if resp, err := client.Do(req); err == nil {
				if resp.StatusCode == http.StatusCreated {
					t.Errorf("PUT answered 201 through the fault")
				}
				resp.Body.Close()
			}
			st := p.Stats()
			if hits != 2 || bodyBytes != 300 {
				t.Errorf("upstream saw %d requests, %d body bytes; want 2, 300", hits, bodyBytes)
			}
			if st.CommitPuts["sha256:abc"] != 1 || st.CompletedUploads["sha256:abc"] != 1 {
				t.Errorf("commit PUTs %v, completed %v; want 1 each", st.CommitPuts, st.CompletedUploads)
			}
			if st.Faults[tc.name] != 2 {
				t.Errorf("faults %v", st.Faults)
			}
		})
	}
}

// Challenge makes the proxy ask for a login as a registry with one does;
// requests carrying Authorization are counted and forwarded.
func TestProxyChallengeCountsAuthorization(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer up.Close()
	p := Start(t, strings.TrimPrefix(up.URL, "http://"), Config{Challenge: "test"})
	get := func(auth string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.Host+"/v2/", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get(""); r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != `Basic realm="test"` {
		t.Errorf("no credential: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	if r := get("Basic dTpw"); r.StatusCode != http.StatusOK {
		t.Errorf("with a credential: %d", r.StatusCode)
	}
	if st := p.Stats(); st.Authorization != 1 || st.Forwarded[KindPing] != 1 || st.Requests[KindPing] != 2 {
		t.Errorf("stats %s, forwarded %v", st, st.Forwarded)
	}
}
