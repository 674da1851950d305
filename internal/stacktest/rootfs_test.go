package stacktest

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rootfsEntry is what TestRootfsContents keeps of a tarball entry.
type rootfsEntry struct {
	hdr  tar.Header
	data []byte // only for the files wanted in full
}

// readRootfs reads the headers of every entry of a rootfs tarball and the
// contents of the files in want.
func readRootfs(t *testing.T, path string, want map[string]bool) map[string]rootfsEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]rootfsEntry{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		e := rootfsEntry{hdr: *h}
		if want[h.Name] {
			if e.data, err = io.ReadAll(tr); err != nil {
				t.Fatalf("%s: reading %s: %v", path, h.Name, err)
			}
		}
		out[h.Name] = e
	}
	return out
}

// TestRootfsContents checks the tarballs scripts/fixture.sh rootfs made
// without running the packages' maintainer scripts: the configuration the
// images rely on is there (accounts, name service, the dynamic loader cache
// of the target's multiarch directories, alternatives, time zone, dpkg's
// database), the Python byte-code is hash-checked (valid with every mtime at
// 0), documentation is left out, and nothing of the build host leaks in.
func TestRootfsContents(t *testing.T) {
	dir := Rootfs(t)
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
	const pyc = "./usr/lib/python3/dist-packages/_pytest/__pycache__/main.cpython-311.pyc"
	for _, flavour := range rootfsFlavours {
		for _, arch := range rootfsArches {
			name := RootfsFlavourTarName(flavour, arch)
			t.Run(name, func(t *testing.T) {
				want := map[string]bool{"./etc/passwd": true, "./etc/group": true, "./etc/shadow": true,
					"./etc/ld.so.cache": true, "./var/lib/dpkg/status": true, "./etc/timezone": true, pyc: true}
				es := readRootfs(t, filepath.Join(dir, name), want)
				file := func(p string) []byte {
					t.Helper()
					e, ok := es[p]
					if !ok || e.hdr.Typeflag != tar.TypeReg {
						t.Errorf("%s: no regular file", p)
						return nil
					}
					return e.data
				}
				link := func(p, target string) {
					t.Helper()
					if e, ok := es[p]; !ok || e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != target {
						t.Errorf("%s: want a symlink to %s, got %+v", p, target, e.hdr)
					}
				}
				if !bytes.HasPrefix(file("./etc/passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n")) {
					t.Errorf("/etc/passwd does not start with root's account")
				}
				if !bytes.Contains(file("./etc/group"), []byte("\nshadow:x:42:\n")) || !bytes.HasPrefix(file("./etc/shadow"), []byte("root:*:")) {
					t.Errorf("/etc/group or /etc/shadow lacks what base-passwd and shadowconfig write")
				}
				// The cache lists libc in the target's multiarch directory
				// (an x86 ldconfig run on an arm64 tree lists nothing).
				if cache := file("./etc/ld.so.cache"); !bytes.Contains(cache, []byte("/lib/"+triplet[arch]+"/libc.so.6")) {
					t.Errorf("/etc/ld.so.cache (%d bytes) does not list /lib/%s/libc.so.6", len(cache), triplet[arch])
				}
				link("./bin", "usr/bin")
				link("./usr/bin/awk", "/etc/alternatives/awk")
				link("./etc/alternatives/awk", "/usr/bin/mawk")
				link("./usr/bin/which", "/etc/alternatives/which")
				link("./etc/localtime", "/usr/share/zoneinfo/Etc/UTC")
				if string(file("./etc/timezone")) != "Etc/UTC\n" {
					t.Errorf("/etc/timezone: %q", file("./etc/timezone"))
				}
				status := string(file("./var/lib/dpkg/status"))
				toolchain := map[string][]string{"py": {"python3", "python3-venv", "python3-pytest", "git", "patch"}, "js": {"nodejs", "git", "patch"}}[flavour]
				for _, pkg := range append([]string{"base-files", "libc6", "bash", "usr-is-merged"}, toolchain...) {
					if !strings.Contains(status, "Package: "+pkg+"\nStatus: install ok installed\n") {
						t.Errorf("dpkg status does not list %s as installed", pkg)
					}
				}
				if strings.Contains(status, "mmdebstrap") {
					t.Errorf("dpkg status still holds mmdebstrap's placeholder usr-is-merged")
				}
				if flavour == "py" {
					// PEP 552 header: magic, then flags 0b11 = hash-based, checked.
					if b := file(pyc); len(b) < 16 || binary.LittleEndian.Uint32(b[4:8]) != 3 {
						t.Errorf("%s: want a checked-hash .pyc, header %x", pyc, b[:min(len(b), 16)])
					}
				} else if _, ok := es["./usr/bin/node"]; !ok {
					t.Errorf("no /usr/bin/node")
				}
				for p, e := range es {
					switch {
					case !e.hdr.ModTime.IsZero() && e.hdr.ModTime.Unix() != 0:
						t.Errorf("%s: mtime %v, want 0 (deterministic tarball)", p, e.hdr.ModTime)
					case strings.HasPrefix(p, "./usr/share/man/") && e.hdr.Typeflag != tar.TypeDir,
						strings.HasPrefix(p, "./usr/share/doc/") && e.hdr.Typeflag != tar.TypeDir && !strings.HasSuffix(p, "/copyright"):
						t.Errorf("%s: documentation left in", p)
					case p == "./etc/hostname" || p == "./etc/resolv.conf" || strings.HasPrefix(p, "./var/cache/apt/archives/") && strings.HasSuffix(p, ".deb"),
						strings.HasPrefix(p, "./dev/") && p != "./dev/", strings.HasPrefix(p, "./proc/") && p != "./proc/":
						t.Errorf("%s: a file of the build host or of the build in the tarball", p)
					}
				}
			})
		}
	}
}
