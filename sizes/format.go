package sizes

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/internal/reportfmt"
)

// formats are the output formats Write accepts, by name.
var formats = []reportfmt.Format[*Report]{{Name: "md", Write: WriteMarkdown}, {Name: "csv", Write: WriteCSV}, {Name: "json", Write: WriteJSON}, {Name: "html", Write: WriteHTML}}

// Formats lists the output formats Write accepts.
var Formats = reportfmt.Names(formats)

// Write renders the report in one of Formats. Every format is deterministic:
// the same report gives the same bytes.
func Write(w io.Writer, r *Report, format string) error {
	return reportfmt.Write(w, r, format, formats)
}

// WriteJSON writes the report as indented JSON (see report.schema.json).
func WriteJSON(w io.Writer, r *Report) error {
	return reportfmt.JSON(w, r)
}

// CSVHeader is the first row of WriteCSV's output.
var CSVHeader = []string{"set", "instance_id", "repo", "platform", "status", "ref", "digest",
	"compressed_bytes", "uncompressed_bytes", "layers", "shared_layers", "error"}

// WriteCSV writes one row per image: set A's rows, then set B's, each
// sorted by instance id and platform. Sizes are in bytes; an unmeasured
// uncompressed size is empty.
func WriteCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	rows := [][]string{CSVHeader}
	for _, s := range sets(r) {
		for _, img := range s.set.Images {
			unc := ""
			if img.UncompressedBytes != nil {
				unc = strconv.FormatInt(*img.UncompressedBytes, 10)
			}
			rows = append(rows, []string{s.name, img.InstanceID, img.Repo, img.Platform.String(), img.Status, img.Ref, img.Digest,
				strconv.FormatInt(img.CompressedBytes, 10), unc, strconv.Itoa(img.Layers), strconv.Itoa(img.SharedLayers), img.Error})
		}
	}
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("writing CSV report: %w", err)
	}
	return nil
}

type namedSet struct {
	name string
	set  *Set
}

func sets(r *Report) []namedSet {
	out := []namedSet{{"A", r.A}}
	if r.B != nil {
		out = append(out, namedSet{"B", r.B})
	}
	return out
}

// HumanBytes formats a byte count with 1024-based units: "512 B",
// "1.50 KiB", "12.3 MiB", "684 GiB".
func HumanBytes(n int64) string {
	if n < 0 {
		return "-" + HumanBytes(-n)
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f %s", v, units[u])
	case v < 100:
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.0f %s", v, units[u])
}

func humanPtr(n *int64) string {
	if n == nil {
		return "–"
	}
	return HumanBytes(*n)
}

func fmtRatio(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f×", *f)
}

func fmtPercent(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", *f*100)
}

func fmtGrowth(f *float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%+.2f%%", *f)
}

// notMeasured lists the images of s that have no size (missing, errors,
// skipped), in the set's order.
func notMeasured(s *Set) []Image {
	var bad []Image
	for _, img := range s.Images {
		if img.Status != StatusOK {
			bad = append(bad, img)
		}
	}
	return bad
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\\", "\\\\")
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "<", "&lt;")
	return s
}

// summaryRow is one measure of the headline table.
type summaryRow struct {
	name       string
	a, b       string
	ca, cb     string
	ratio      string
	hideIfNoUC bool
}

func summaryRows(r *Report) []summaryRow {
	a := r.A.Totals
	rows := []summaryRow{
		{name: "images", a: strconv.Itoa(a.Images)},
		{name: "measured", a: strconv.Itoa(a.Measured)},
		{name: "missing", a: strconv.Itoa(a.Missing)},
		{name: "errors", a: strconv.Itoa(a.Errors)},
		{name: "layers (naive)", a: strconv.Itoa(a.Layers)},
		{name: "unique layers", a: strconv.Itoa(a.UniqueLayers)},
		{name: "naive compressed", a: HumanBytes(a.NaiveCompressedBytes)},
		{name: "unique-layer compressed", a: HumanBytes(a.UniqueCompressedBytes)},
		{name: "shared fraction", a: fmtPercent(a.SharedFraction)},
		{name: "naive uncompressed", a: humanPtr(a.NaiveUncompressedBytes), hideIfNoUC: true},
		{name: "unique-layer uncompressed", a: humanPtr(a.UniqueUncompressedBytes), hideIfNoUC: true},
	}
	if r.B == nil {
		return rows
	}
	b, c := r.B.Totals, r.Comparison
	bs := []string{strconv.Itoa(b.Images), strconv.Itoa(b.Measured), strconv.Itoa(b.Missing), strconv.Itoa(b.Errors),
		strconv.Itoa(b.Layers), strconv.Itoa(b.UniqueLayers), HumanBytes(b.NaiveCompressedBytes), HumanBytes(b.UniqueCompressedBytes),
		fmtPercent(b.SharedFraction), humanPtr(b.NaiveUncompressedBytes), humanPtr(b.UniqueUncompressedBytes)}
	ca := []string{strconv.Itoa(c.CommonImages), strconv.Itoa(c.A.Measured), "", "",
		strconv.Itoa(c.A.Layers), strconv.Itoa(c.A.UniqueLayers), HumanBytes(c.A.NaiveCompressedBytes), HumanBytes(c.A.UniqueCompressedBytes),
		fmtPercent(c.A.SharedFraction), humanPtr(c.A.NaiveUncompressedBytes), humanPtr(c.A.UniqueUncompressedBytes)}
	cb := []string{strconv.Itoa(c.CommonImages), strconv.Itoa(c.B.Measured), "", "",
		strconv.Itoa(c.B.Layers), strconv.Itoa(c.B.UniqueLayers), HumanBytes(c.B.NaiveCompressedBytes), HumanBytes(c.B.UniqueCompressedBytes),
		fmtPercent(c.B.SharedFraction), humanPtr(c.B.NaiveUncompressedBytes), humanPtr(c.B.UniqueUncompressedBytes)}
	ratios := []string{"", "", "", "", "", "", fmtRatio(c.Ratios.NaiveCompressed), fmtRatio(c.Ratios.UniqueCompressed), "",
		fmtRatio(c.Ratios.NaiveUncompressed), fmtRatio(c.Ratios.UniqueUncompressed)}
	for i := range rows {
		rows[i].b, rows[i].ca, rows[i].cb, rows[i].ratio = bs[i], ca[i], cb[i], ratios[i]
	}
	return rows
}

// WriteMarkdown writes a report for a GitHub job summary: the headline
// table, per-repository subtotals, then per-image rows in a collapsed block.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b page
	b.p("## Image sizes\n\n")
	b.p("**A:** `%s`", mdCell(r.A.Label))
	if r.B != nil {
		b.p(" · **B:** `%s`", mdCell(r.B.Label))
	}
	b.p("\n\n")
	b.mdTotals(r)
	b.mdRepos(r)
	for _, s := range sets(r) {
		bad := notMeasured(s.set)
		if len(bad) == 0 {
			continue
		}
		b.p("### Not measured in %s (%d)\n\n| instance | platform | status | detail |\n|---|---|---|---|\n", s.name, len(bad))
		for _, img := range bad {
			b.p("| %s | %s | %s | %s |\n", mdCell(img.InstanceID), img.Platform, img.Status, mdCell(firstLine(img.Error, 200)))
		}
		b.p("\n")
	}
	b.mdImages(r)
	b.p("_%s_\n", UnitsNote)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing Markdown report: %w", err)
	}
	return nil
}

// page is a report being written, by format strings.
type page struct {
	strings.Builder
}

func (b *page) p(format string, args ...any) { fmt.Fprintf(b, format, args...) }

// growthVerdict says how A's growth against B stands to the limit:
// "within", "exceeds", or "not checked against" (no common image measured).
func growthVerdict(r *Report) string {
	switch {
	case r.GrowthExceeded:
		return "exceeds"
	case r.Comparison.GrowthPercent == nil:
		return "not checked against"
	}
	return "within"
}

// compressedCell is an image's compressed size, or its status when it has
// none.
func compressedCell(img Image) string {
	if img.Status == StatusOK {
		return HumanBytes(img.CompressedBytes)
	}
	return img.Status
}

// againstB is the compressed size (or status) of img's image in set B and
// the ratio of A's to it; "–" for what is not there.
func againstB(img Image, bIdx map[imageKey]Image) (bComp, rat string) {
	bComp, rat = "–", "–"
	if bi, ok := bIdx[imageKey{img.InstanceID, img.Platform}]; ok {
		bComp = compressedCell(bi)
		if bi.Status == StatusOK && img.Status == StatusOK {
			rat = fmtRatio(ratio(img.CompressedBytes, bi.CompressedBytes))
		}
	}
	return bComp, rat
}

// mdTotals writes the headline table and the growth verdict.
func (b *page) mdTotals(r *Report) {
	b.mdTable(totalsTable(r))
	b.p("\n")
	if c := r.Comparison; c != nil {
		b.p("Growth of A against B (unique-layer compressed, %d common images): **%s**", c.CommonImages, fmtGrowth(c.GrowthPercent))
		if r.MaxGrowthPercent != nil {
			verdict := growthVerdict(r)
			if r.GrowthExceeded {
				verdict = "**EXCEEDS**"
			}
			b.p(" — %s the limit of %.2f%%", verdict, *r.MaxGrowthPercent)
		}
		b.p("\n\n")
	}
}

// mdRepos writes the per-repository table.
func (b *page) mdRepos(r *Report) {
	b.p("### Per repository\n\n")
	b.p("Unique-layer figures count a repository's distinct layers once; a layer shared across repositories (a base) is in each repository's figure.\n\n")
	b.mdTable(reposTable(r))
	b.p("\n")
}

// table is a table of the report, written as Markdown or HTML: its
// header, its rows, and how many of its first columns are left-aligned
// (the others are figures, right-aligned).
type table struct {
	header []string
	rows   [][]string
	left   int
}

// totalsTable is the headline table: A's totals, and with B B's, both on
// the common images, and their ratios.
func totalsTable(r *Report) table {
	t := table{header: []string{"measure", "A"}, left: 1}
	if r.B != nil {
		t.header = []string{"measure", "A (all)", "B (all)", "A (common)", "B (common)", "A/B (common)"}
	}
	for _, row := range summaryRows(r) {
		if row.hideIfNoUC && !r.UncompressedMeasured {
			continue
		}
		if r.B == nil {
			t.rows = append(t.rows, []string{row.name, row.a})
		} else {
			t.rows = append(t.rows, []string{row.name, row.a, row.b, row.ca, row.cb, row.ratio})
		}
	}
	return t
}

// reposTable is the per-repository table: A's repositories, or with B the
// union of both sets' and their ratios on the common images.
func reposTable(r *Report) table {
	if r.B == nil {
		t := table{header: []string{"repository", "images", "measured", "naive compressed", "unique-layer compressed", "shared"}, left: 1}
		for _, rt := range r.A.Repos {
			t.rows = append(t.rows, []string{rt.Repo, strconv.Itoa(rt.Images), strconv.Itoa(rt.Measured),
				naiveOrDash(rt.Totals), unmeasured(rt.Totals), fmtPercent(rt.SharedFraction)})
		}
		return t
	}
	t := table{header: []string{"repository", "A measured", "A unique-layer compressed", "B measured", "B unique-layer compressed", "common", "A/B (common)"}, left: 1}
	for _, row := range repoRows(r) {
		t.rows = append(t.rows, []string{row.repo, row.aMeasured, row.aUnique, row.bMeasured, row.bUnique, row.common, row.ratio})
	}
	return t
}

// mdTable writes t as a Markdown table, its cells escaped.
func (b *page) mdTable(t table) {
	b.p("| %s |\n|%s%s\n", strings.Join(t.header, " | "), strings.Repeat("---|", t.left), strings.Repeat("---:|", len(t.header)-t.left))
	for _, row := range t.rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = mdCell(c)
		}
		b.p("| %s |\n", strings.Join(cells, " | "))
	}
}

// mdImages writes the per-image rows in a collapsed block.
func (b *page) mdImages(r *Report) {
	b.p("<details><summary>Per image (%d)</summary>\n\n", len(r.A.Images))
	if r.B == nil {
		b.p("| instance | platform | compressed | uncompressed | layers | shared layers |\n|---|---|---:|---:|---:|---:|\n")
	} else {
		b.p("| instance | platform | A compressed | A uncompressed | layers | shared layers | B compressed | A/B |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	}
	bIdx := imageIndex(r.B)
	for _, img := range r.A.Images {
		comp, unc := compressedCell(img), humanPtr(img.UncompressedBytes)
		if r.B == nil {
			b.p("| %s | %s | %s | %s | %d | %d |\n", mdCell(img.InstanceID), img.Platform, comp, unc, img.Layers, img.SharedLayers)
			continue
		}
		bComp, rat := againstB(img, bIdx)
		b.p("| %s | %s | %s | %s | %d | %d | %s | %s |\n", mdCell(img.InstanceID), img.Platform, comp, unc, img.Layers, img.SharedLayers, bComp, rat)
	}
	b.p("\n</details>\n\n")
}

// imageKey is an instance's image on a platform.
type imageKey struct {
	id       string
	platform core.Platform
}

func imageIndex(s *Set) map[imageKey]Image {
	m := map[imageKey]Image{}
	if s == nil {
		return m
	}
	for _, img := range s.Images {
		m[imageKey{img.InstanceID, img.Platform}] = img
	}
	return m
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// repoRow is one line of the A-vs-B per-repository table: the union of
// both sets' repositories, sorted.
type repoRow struct {
	repo                 string
	aMeasured, bMeasured string
	aUnique, bUnique     string
	aBytes, bBytes       int64
	common, ratio        string
}

func repoRows(r *Report) []repoRow {
	at, bt := map[string]RepoTotals{}, map[string]RepoTotals{}
	names := map[string]bool{}
	for _, x := range r.A.Repos {
		at[x.Repo], names[x.Repo] = x, true
	}
	if r.B != nil {
		for _, x := range r.B.Repos {
			bt[x.Repo], names[x.Repo] = x, true
		}
	}
	cmp := map[string]RepoComparison{}
	if r.Comparison != nil {
		for _, x := range r.Comparison.Repos {
			cmp[x.Repo] = x
		}
	}
	var out []repoRow
	for _, n := range sortedKeys(names) {
		row := repoRow{repo: n, aMeasured: "0", bMeasured: "0", aUnique: "–", bUnique: "–", common: "0", ratio: "–"}
		if x, ok := at[n]; ok {
			row.aMeasured, row.aUnique, row.aBytes = strconv.Itoa(x.Measured), unmeasured(x.Totals), x.UniqueCompressedBytes
		}
		if x, ok := bt[n]; ok {
			row.bMeasured, row.bUnique, row.bBytes = strconv.Itoa(x.Measured), unmeasured(x.Totals), x.UniqueCompressedBytes
		}
		if x, ok := cmp[n]; ok {
			row.common, row.ratio = strconv.Itoa(x.CommonImages), fmtRatio(x.Ratio)
		}
		out = append(out, row)
	}
	return out
}

// unmeasured formats a group's unique compressed size, or says why there
// is none ("not measured: 1 missing") so a zero is never shown for a
// repository whose images are absent.
func unmeasured(t Totals) string {
	if t.Measured > 0 {
		return HumanBytes(t.UniqueCompressedBytes)
	}
	var why []string
	if t.Missing > 0 {
		why = append(why, strconv.Itoa(t.Missing)+" missing")
	}
	if t.Errors > 0 {
		why = append(why, strconv.Itoa(t.Errors)+" failed")
	}
	return "not measured: " + strings.Join(why, ", ")
}

// naiveOrDash formats a group's naive compressed size, "–" when nothing in
// it was measured.
func naiveOrDash(t Totals) string {
	if t.Measured == 0 {
		return "–"
	}
	return HumanBytes(t.NaiveCompressedBytes)
}
