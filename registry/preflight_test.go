package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/regtest"
)

// TestCheckPush: the check before a build's or publish's first write, on a
// real distribution 2.8 registry with htpasswd, a port nobody listens on
// and one that never answers. Each refusal names the host and, for a login
// problem, where the credential was looked for.
func TestCheckPush(t *testing.T) {
	const user, pass = "pusher", "Push-Pa55"
	login := regtest.Start(t, regtest.Options{User: user, Password: pass})
	plain := regtest.Start(t, regtest.Options{})
	dead := faultproxy.Refused(t)
	silent := faultproxy.Silent(t)
	creds := func(text string) *Credentials {
		t.Helper()
		c, err := NewCredentials(CredentialOptions{Text: text, TextSource: "$TEST_AUTH", DefaultRegistry: login.Host, DockerConfigDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		repo  string
		creds *Credentials
		want  []string // in the error; none: the check passes
		// unreachable: the error says the host does not answer.
		unreachable bool
		within      time.Duration
	}{
		{"plain registry", plain.Host + "/swebuild/build", creds(""), nil, false, 5 * time.Second},
		{"login registry, right password", login.Host + "/swebuild/build", creds(user + ":" + pass), nil, false, 5 * time.Second},
		{"login registry, no credential", login.Host + "/swebuild/build", creds(""),
			[]string{"registry " + login.Host + " refused", "no credential found for " + login.Host + " (looked in $TEST_AUTH and "}, false, 5 * time.Second},
		{"login registry, wrong password", login.Host + "/swebuild/build", creds(user + ":wrong"),
			[]string{"registry " + login.Host + " refused", "credential for " + login.Host + " from $TEST_AUTH"}, false, 5 * time.Second},
		{"dead loopback registry", dead + "/swebuild/build", creds(""),
			[]string{"registry " + dead + " does not answer", "a registry on this machine: is it running?"}, true, PushCheckBudget.MaxWaits() + 2*time.Second},
		{"silent registry", silent + "/swebuild/build", creds(""),
			[]string{"registry " + silent + " does not answer"}, true, PushCheckBudget.MaxElapsed + PushCheckBudget.AnswerTimeout + 2*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			err := CheckPush(context.Background(), Options{Keychain: tc.creds}, tc.repo)
			el := time.Since(begin)
			t.Logf("%v: %v", el.Round(time.Millisecond), err)
			if el > tc.within {
				t.Errorf("took %v, want at most %v", el, tc.within)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckPush: %v", err)
				}
				return
			}
			var pe *PushCheckError
			if !errors.As(err, &pe) || pe.Unreachable != tc.unreachable {
				t.Fatalf("error %v (%T), want a *PushCheckError with Unreachable %v", err, err, tc.unreachable)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), "wrong") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}
