package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pipeline"
)

// TestVerifyPlatformsDefault: verify's platforms are the --platform flags
// given, else the host's only; another platform is run only when asked, and
// a host that is neither amd64 nor arm64 must say which.
func TestVerifyPlatformsDefault(t *testing.T) {
	noHost := errors.New(`this host's architecture "riscv64" is neither amd64 nor arm64`)
	for _, tc := range []struct {
		name    string
		args    []string
		host    core.Platform
		hostErr error
		want    []core.Platform
		wantErr string
	}{
		{"amd64 host, no flag", nil, core.AMD64, nil, []core.Platform{core.AMD64}, ""},
		{"arm64 host, no flag", nil, core.ARM64, nil, []core.Platform{core.ARM64}, ""},
		{"amd64 host, arm64 asked", []string{"--platform", "linux/arm64"}, core.AMD64, nil, []core.Platform{core.ARM64}, ""},
		{"amd64 host, both asked", []string{"--platform", "linux/amd64,linux/arm64"}, core.AMD64, nil, []core.Platform{core.AMD64, core.ARM64}, ""},
		{"both asked twice, reversed", []string{"--platform", "arm64", "--platform", "x86_64"}, core.AMD64, nil, []core.Platform{core.AMD64, core.ARM64}, ""},
		{"other host, no flag", nil, core.Platform{}, noHost, nil, "give --platform"},
		{"other host, amd64 asked", []string{"--platform", "linux/amd64"}, core.Platform{}, noHost, []core.Platform{core.AMD64}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var f verifyFlags
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := pipeline.VerifyPlatforms(f.platforms, tc.host, tc.hostErr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error naming %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
