package sizes

import (
	"fmt"
	"io"
	"testing"

	"github.com/swebuild/swebuild/core"
)

// benchSet builds a set shaped like the full SWE-bench test split: 2294
// images over 12 repositories, each with 3 shared base layers, one env layer
// per (repo, 8 versions) and 6 instance layers of its own.
func benchSet(label string, scale int64) *Set {
	s := &Set{Label: label}
	for i := 0; i < 2294; i++ {
		repo := fmt.Sprintf("owner%d/repo%d", i%12, i%12)
		var layers []Blob
		for b := 0; b < 3; b++ {
			layers = append(layers, Blob{Digest: fmt.Sprintf("sha256:base%d", b), Size: 300 << 20 * scale / 10})
		}
		layers = append(layers, Blob{Digest: fmt.Sprintf("sha256:env-%d-%d", i%12, i%8), Size: 900 << 20 * scale / 10})
		var total int64
		for k := 0; k < 6; k++ {
			layers = append(layers, Blob{Digest: fmt.Sprintf("sha256:inst-%d-%d", i, k), Size: int64(10<<20+i*k) * scale / 10})
		}
		for _, l := range layers {
			total += l.Size
		}
		s.Images = append(s.Images, Image{InstanceID: fmt.Sprintf("owner%d__repo%d-%05d", i%12, i%12, i), Repo: repo,
			Platform: core.AMD64, Status: StatusOK, CompressedBytes: total, Layers: len(layers), layers: layers})
	}
	return s
}

// BenchmarkReportFullSplit: totals, comparison and every format for two
// 2294-image sets (the work after the registry answers).
func BenchmarkReportFullSplit(b *testing.B) {
	for b.Loop() {
		a, bb := benchSet("A", 10), benchSet("B", 12)
		a.finish()
		bb.finish()
		r := NewReport(a, bb, false, nil)
		for _, f := range Formats {
			if err := Write(io.Discard, r, f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
