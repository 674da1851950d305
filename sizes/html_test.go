package sizes

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTMLScreenshot renders the HTML report of the real-registry fixture
// (A against B) in headless Chromium and checks the picture: the page size,
// and enough pixels of A's and B's bar colours that the chart was drawn.
// With SWEBUILD_SIZES_SCREENSHOT=FILE.png the PNG (and FILE.html) are kept
// for a person to look at (scripts/sizes-screenshot.sh does that).
func TestHTMLScreenshot(t *testing.T) {
	needTool(t, "chromium")
	needTool(t, "skopeo")
	f := startFixture(t)
	ctx := context.Background()
	rep, err := Run(ctx, Config{
		Images:  "swebuild:" + f.proxyHost + "/swebuild",
		Against: "epoch:" + f.proxyHost + "/epoch-research",
		Dataset: f.dataset, Options: Options{Jobs: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	// Self-contained: no scripts, no external resources.
	for _, bad := range []string{"<script", "src=\"http", "href=\"http", "@import", "url("} {
		if strings.Contains(page.String(), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	dir := t.TempDir()
	htmlPath := filepath.Join(dir, "sizes.html")
	if err := os.WriteFile(htmlPath, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pngPath := filepath.Join(dir, "sizes.png")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+pngPath,
		"--window-size=1200,900", "file://"+htmlPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	fh, err := os.Open(pngPath)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatalf("decoding screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900 {
		t.Errorf("screenshot is %dx%d, want 1200x900", b.Dx(), b.Dy())
	}
	nA, nB := countColor(img, colorA), countColor(img, colorB)
	// Four repositories, bars at least a few pixels long and 16 high: far
	// more than 500 pixels of each colour when the chart is on screen.
	if nA < 500 || nB < 500 {
		t.Errorf("chart pixels: A %d, B %d; the chart is not visible in the first screen", nA, nB)
	}
	if keep := os.Getenv("SWEBUILD_SIZES_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(pngPath)
		if err := os.WriteFile(keep, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(strings.TrimSuffix(keep, filepath.Ext(keep))+".html", page.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept at %s", keep)
	}
}

// countColor counts pixels within a small distance of the hex colour.
func countColor(img image.Image, hex string) int {
	var want color.RGBA
	for i, p := range []*uint8{&want.R, &want.G, &want.B} {
		v, _ := parseHexByte(hex[1+2*i : 3+2*i])
		*p = v
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(uint8(r>>8), want.R) && near(uint8(g>>8), want.G) && near(uint8(bl>>8), want.B) {
				n++
			}
		}
	}
	return n
}

func near(a, b uint8) bool {
	d := int(a) - int(b)
	return d >= -6 && d <= 6
}

func parseHexByte(s string) (uint8, bool) {
	var v uint8
	for _, c := range s {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= uint8(c - '0')
		case c >= 'a' && c <= 'f':
			v |= uint8(c-'a') + 10
		default:
			return 0, false
		}
	}
	return v, true
}
