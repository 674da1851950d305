package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
)

// Every upstream meta.json names its instance image under the swebench
// namespace; our per-arch names must match all of them exactly.
func TestArchRepoMatchesUpstreamNamespacedKeys(t *testing.T) {
	metas, err := filepath.Glob(filepath.Join(spectest.SharedDir(t), "upstream-v4.1.0", "instances", "*", "*", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) < 100 {
		t.Fatalf("only %d meta.json files found", len(metas))
	}
	n := Namer{Repo: "swebench"}
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			InstanceID string `json:"instance_id"`
			Arch       string `json:"arch"`
			Remote     string `json:"remote_instance_image_key_namespace_swebench"`
			Local      string `json:"instance_image_key"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got := n.ArchRepo(m.Arch, m.InstanceID) + ":" + LatestTag; got != m.Remote {
			t.Errorf("%s: got %q, upstream %q", m.InstanceID, got, m.Remote)
		}
		// Without the replacement the name is upstream's local key.
		local := Namer{Repo: "x", KeepDoubleUnderscore: true}.ArchRepo(m.Arch, m.InstanceID)
		if strings.TrimPrefix(local, "x/")+":latest" != m.Local {
			t.Errorf("%s: local %q, upstream %q", m.InstanceID, local, m.Local)
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		repo, id, arch, archRepo, indexRepo string
	}{
		{"127.0.0.1:5000/swebench", "django__django-11099", "x86_64", "127.0.0.1:5000/swebench/sweb.eval.x86_64.django_1776_django-11099", "127.0.0.1:5000/swebench/sweb.eval.django_1776_django-11099"},
		{"ghcr.io/org/", "Psf__Requests-2317", "arm64", "ghcr.io/org/sweb.eval.arm64.psf_1776_requests-2317", "ghcr.io/org/sweb.eval.psf_1776_requests-2317"},
		{"r", "a___b", "arm64", "r/sweb.eval.arm64.a_1776__b", "r/sweb.eval.a_1776__b"},
	} {
		n := Namer{Repo: tc.repo}
		if got := n.ArchRepo(tc.arch, tc.id); got != tc.archRepo {
			t.Errorf("ArchRepo(%s, %s) = %q, want %q", tc.arch, tc.id, got, tc.archRepo)
		}
		if got := n.IndexRepo(tc.id); got != tc.indexRepo {
			t.Errorf("IndexRepo(%s) = %q, want %q", tc.id, got, tc.indexRepo)
		}
	}
}

func TestPlatformArch(t *testing.T) {
	for _, tc := range []struct {
		platform, arch string
		ok             bool
	}{
		{"linux/amd64", "x86_64", true},
		{"linux/arm64", "arm64", true},
		{"linux/arm64/v8", "arm64", true},
		{"linux/386", "", false},
		{"", "", false},
	} {
		got, err := ArchForPlatform(tc.platform)
		if (err == nil) != tc.ok || got != tc.arch {
			t.Errorf("ArchForPlatform(%q) = %q, %v", tc.platform, got, err)
		}
	}
	for _, arch := range []string{ArchX86_64, ArchArm64} {
		p, err := PlatformForArch(arch)
		if err != nil {
			t.Fatal(err)
		}
		back, _ := ArchForPlatform(p)
		if back != arch {
			t.Errorf("round trip %s -> %s -> %s", arch, p, back)
		}
	}
	if _, err := PlatformForArch("aarch64"); err == nil {
		t.Error("aarch64 accepted")
	}
}

func TestContentTag(t *testing.T) {
	// sha256("abc\n") = edeaaff3f1774ad2888673770c6d64097e391bc362d7d6fb34982ddf0efd18cb
	if got := ContentTag("abc"); got != "k-edeaaff3f177" {
		t.Errorf("ContentTag(abc) = %q", got)
	}
	if ContentTag("a", "b") != ContentTag("b", "a") {
		t.Error("ContentTag depends on key order")
	}
	if ContentTag("a") == ContentTag("a-pinned") {
		t.Error("changed key, same tag")
	}
	if len(ContentTag("x")) != 14 {
		t.Errorf("tag length %d", len(ContentTag("x")))
	}
}
