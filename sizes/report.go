package sizes

import (
	_ "embed"
	"fmt"
	"math"
	"sort"

	"github.com/swebuild/swebuild/core"
)

// SchemaID names the JSON report format; report.schema.json describes it.
const SchemaID = "https://github.com/swebuild/swebuild/sizes/report.schema.json#v1"

//go:embed report.schema.json
var jsonSchema string

// JSONSchema returns the JSON Schema (draft 2020-12) of the JSON report,
// with a description of every field.
func JSONSchema() string { return jsonSchema }

// UnitsNote is printed with every human-readable report.
const UnitsNote = "Sizes in bytes in JSON/CSV; human-readable figures use 1024-based units (1 KiB = 1024 B, 1 MiB = 1024² B, 1 GiB = 1024³ B). Compressed = sum of the layer sizes in the manifest (what a pull downloads); uncompressed = sum of the decompressed layer tars."

// Report is the whole result of `swebuild sizes`; its JSON form is the
// schema in report.schema.json.
type Report struct {
	Schema               string      `json:"schema"`
	Units                string      `json:"units"`
	UncompressedMeasured bool        `json:"uncompressed_measured"`
	A                    *Set        `json:"a"`
	B                    *Set        `json:"b"`
	Comparison           *Comparison `json:"comparison"`
	MaxGrowthPercent     *float64    `json:"max_growth_percent"`
	GrowthExceeded       bool        `json:"growth_exceeded"`
}

// Set is one measured image set.
type Set struct {
	Label    string `json:"label"`
	Scheme   string `json:"scheme"`
	Template string `json:"template,omitempty"`
	File     string `json:"file,omitempty"`
	// PlatformSkipped counts (instance, platform) pairs not looked up
	// because the instance has no image for that platform (x86-only).
	PlatformSkipped int          `json:"platform_skipped"`
	Totals          Totals       `json:"totals"`
	Repos           []RepoTotals `json:"repos"`
	Images          []Image      `json:"images"`

	uncompressed map[string]int64 // layer digest -> uncompressed size
}

// Image is one (instance, platform) image of a set.
type Image struct {
	InstanceID        string        `json:"instance_id"`
	Repo              string        `json:"repo"`
	Platform          core.Platform `json:"platform"`
	Ref               string        `json:"ref"`
	Status            string        `json:"status"`
	Error             string        `json:"error,omitempty"`
	Digest            string        `json:"digest,omitempty"`
	CompressedBytes   int64         `json:"compressed_bytes"`
	UncompressedBytes *int64        `json:"uncompressed_bytes"`
	Layers            int           `json:"layers"`
	SharedLayers      int           `json:"shared_layers"`

	layers []Blob
}

// Totals sums a group of images. Only images with status ok count in the
// byte and layer figures.
type Totals struct {
	Images                  int      `json:"images"`
	Measured                int      `json:"measured"`
	Missing                 int      `json:"missing"`
	Errors                  int      `json:"errors"`
	Layers                  int      `json:"layers"`
	UniqueLayers            int      `json:"unique_layers"`
	NaiveCompressedBytes    int64    `json:"naive_compressed_bytes"`
	UniqueCompressedBytes   int64    `json:"unique_compressed_bytes"`
	NaiveUncompressedBytes  *int64   `json:"naive_uncompressed_bytes"`
	UniqueUncompressedBytes *int64   `json:"unique_uncompressed_bytes"`
	SharedFraction          *float64 `json:"shared_fraction"`
}

// RepoTotals are the totals of one GitHub repository's images.
type RepoTotals struct {
	Repo string `json:"repo"`
	Totals
}

// Comparison compares set A against set B over the (instance, platform)
// pairs measured in both, so an image missing on one side does not count
// as a size change.
type Comparison struct {
	CommonImages  int               `json:"common_images"`
	A             Totals            `json:"a"`
	B             Totals            `json:"b"`
	Ratios        Ratios            `json:"ratios"`
	GrowthPercent *float64          `json:"growth_percent"`
	Repos         []RepoComparison  `json:"repos"`
	Images        []ImageComparison `json:"images"`
}

// Ratios are A divided by B; null where B is zero or not measured.
type Ratios struct {
	NaiveCompressed    *float64 `json:"naive_compressed"`
	UniqueCompressed   *float64 `json:"unique_compressed"`
	NaiveUncompressed  *float64 `json:"naive_uncompressed"`
	UniqueUncompressed *float64 `json:"unique_uncompressed"`
}

// RepoComparison compares one repository's common images.
type RepoComparison struct {
	Repo                   string   `json:"repo"`
	CommonImages           int      `json:"common_images"`
	AUniqueCompressedBytes int64    `json:"a_unique_compressed_bytes"`
	BUniqueCompressedBytes int64    `json:"b_unique_compressed_bytes"`
	Ratio                  *float64 `json:"ratio"`
}

// ImageComparison compares one common image.
type ImageComparison struct {
	InstanceID       string        `json:"instance_id"`
	Platform         core.Platform `json:"platform"`
	ACompressedBytes int64         `json:"a_compressed_bytes"`
	BCompressedBytes int64         `json:"b_compressed_bytes"`
	Ratio            *float64      `json:"ratio"`
}

// finish sorts the images, counts shared layers and computes the totals.
func (s *Set) finish() {
	sort.SliceStable(s.Images, func(i, j int) bool {
		a, b := s.Images[i], s.Images[j]
		if a.InstanceID != b.InstanceID {
			return a.InstanceID < b.InstanceID
		}
		return a.Platform.Compare(b.Platform) < 0
	})
	users := map[string]int{} // layer digest -> number of ok images using it
	for _, img := range s.Images {
		if img.Status != StatusOK {
			continue
		}
		for d := range distinctLayers(img.layers) {
			users[d]++
		}
	}
	for i := range s.Images {
		img := &s.Images[i]
		img.SharedLayers = 0
		if img.Status != StatusOK {
			continue
		}
		for d := range distinctLayers(img.layers) {
			if users[d] > 1 {
				img.SharedLayers++
			}
		}
	}
	s.Totals = s.totals(s.Images)
	byRepo := map[string][]Image{}
	for _, img := range s.Images {
		byRepo[repoKey(img.Repo)] = append(byRepo[repoKey(img.Repo)], img)
	}
	s.Repos = []RepoTotals{}
	if s.Images == nil {
		s.Images = []Image{}
	}
	for _, r := range sortedKeys(byRepo) {
		s.Repos = append(s.Repos, RepoTotals{Repo: r, Totals: s.totals(byRepo[r])})
	}
}

func repoKey(r string) string {
	if r == "" {
		return "(unknown)"
	}
	return r
}

func distinctLayers(ls []Blob) map[string]int64 {
	m := make(map[string]int64, len(ls))
	for _, l := range ls {
		m[l.Digest] = l.Size
	}
	return m
}

// totals sums a group of this set's images; a layer used by several of
// them counts once in the unique figures.
func (s *Set) totals(imgs []Image) Totals {
	var t Totals
	unique := map[string]int64{}
	var naiveU int64
	for _, img := range imgs {
		t.Images++
		switch img.Status {
		case StatusMissing:
			t.Missing++
			continue
		case StatusError:
			t.Errors++
			continue
		}
		t.Measured++
		t.Layers += len(img.layers)
		for _, l := range img.layers {
			t.NaiveCompressedBytes += l.Size
			unique[l.Digest] = l.Size
			naiveU += s.uncompressed[l.Digest]
		}
	}
	t.UniqueLayers = len(unique)
	var uniqueU int64
	for d, n := range unique {
		t.UniqueCompressedBytes += n
		uniqueU += s.uncompressed[d]
	}
	if s.uncompressed != nil {
		t.NaiveUncompressedBytes, t.UniqueUncompressedBytes = &naiveU, &uniqueU
	}
	if t.NaiveCompressedBytes > 0 {
		f := round4(1 - float64(t.UniqueCompressedBytes)/float64(t.NaiveCompressedBytes))
		t.SharedFraction = &f
	}
	return t
}

// Compare builds the comparison of a against b over the images measured in
// both.
func Compare(a, b *Set) *Comparison {
	type key struct {
		id       string
		platform core.Platform
	}
	bOK := map[key]Image{}
	for _, img := range b.Images {
		if img.Status == StatusOK {
			bOK[key{img.InstanceID, img.Platform}] = img
		}
	}
	var ca, cb []Image
	c := &Comparison{Repos: []RepoComparison{}, Images: []ImageComparison{}}
	for _, img := range a.Images {
		if img.Status != StatusOK {
			continue
		}
		bi, ok := bOK[key{img.InstanceID, img.Platform}]
		if !ok {
			continue
		}
		ca, cb = append(ca, img), append(cb, bi)
		c.Images = append(c.Images, ImageComparison{
			InstanceID: img.InstanceID, Platform: img.Platform,
			ACompressedBytes: img.CompressedBytes, BCompressedBytes: bi.CompressedBytes,
			Ratio: ratio(img.CompressedBytes, bi.CompressedBytes),
		})
	}
	c.CommonImages = len(ca)
	c.A, c.B = a.totals(ca), b.totals(cb)
	c.Ratios = Ratios{
		NaiveCompressed:    ratio(c.A.NaiveCompressedBytes, c.B.NaiveCompressedBytes),
		UniqueCompressed:   ratio(c.A.UniqueCompressedBytes, c.B.UniqueCompressedBytes),
		NaiveUncompressed:  ratioPtr(c.A.NaiveUncompressedBytes, c.B.NaiveUncompressedBytes),
		UniqueUncompressed: ratioPtr(c.A.UniqueUncompressedBytes, c.B.UniqueUncompressedBytes),
	}
	if c.B.UniqueCompressedBytes > 0 {
		g := round4((float64(c.A.UniqueCompressedBytes)/float64(c.B.UniqueCompressedBytes) - 1) * 100)
		c.GrowthPercent = &g
	}
	repoA, repoB := map[string][]Image{}, map[string][]Image{}
	for i := range ca {
		k := repoKey(ca[i].Repo)
		repoA[k] = append(repoA[k], ca[i])
		repoB[k] = append(repoB[k], cb[i])
	}
	for _, r := range sortedKeys(repoA) {
		ta, tb := a.totals(repoA[r]), b.totals(repoB[r])
		c.Repos = append(c.Repos, RepoComparison{
			Repo: r, CommonImages: len(repoA[r]),
			AUniqueCompressedBytes: ta.UniqueCompressedBytes, BUniqueCompressedBytes: tb.UniqueCompressedBytes,
			Ratio: ratio(ta.UniqueCompressedBytes, tb.UniqueCompressedBytes),
		})
	}
	return c
}

// NewReport assembles a report; b may be nil. maxGrowth (percent) may be
// nil; when set and the comparison's growth exceeds it, GrowthExceeded is
// true.
func NewReport(a, b *Set, uncompressed bool, maxGrowth *float64) *Report {
	r := &Report{Schema: SchemaID, Units: UnitsNote, UncompressedMeasured: uncompressed, A: a, B: b, MaxGrowthPercent: maxGrowth}
	if b != nil {
		r.Comparison = Compare(a, b)
		if maxGrowth != nil && r.Comparison.GrowthPercent != nil && *r.Comparison.GrowthPercent > *maxGrowth {
			r.GrowthExceeded = true
		}
	}
	return r
}

// Problems lists what should make the command exit non-zero: image errors
// and an exceeded growth limit. Missing images are reported, not failures,
// and so is a comparison with no common images (the first publication of a
// set has nothing to grow from): the growth is then "not measured", shown as
// such in every format, and does not fail --max-growth.
func (r *Report) Problems() []string {
	var out []string
	for _, s := range []*Set{r.A, r.B} {
		if s == nil {
			continue
		}
		if s.Totals.Errors > 0 {
			out = append(out, fmt.Sprintf("%s: %d image(s) could not be measured", s.Label, s.Totals.Errors))
		}
	}
	if r.GrowthExceeded {
		out = append(out, fmt.Sprintf("size regression: unique-layer compressed size grew %.2f%% (limit %.2f%%) over %d common images",
			*r.Comparison.GrowthPercent, *r.MaxGrowthPercent, r.Comparison.CommonImages))
	}
	return out
}

func ratio(a, b int64) *float64 {
	if b == 0 {
		return nil
	}
	f := round4(float64(a) / float64(b))
	return &f
}

func ratioPtr(a, b *int64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return ratio(*a, *b)
}

func round4(f float64) float64 { return math.Round(f*10000) / 10000 }
