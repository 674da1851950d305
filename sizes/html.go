package sizes

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// Colours of set A and set B in the chart and legend.
const (
	colorA = "#2563eb"
	colorB = "#ea580c"
)

// WriteHTML writes a self-contained page (inline CSS and SVG, no scripts,
// no external resources): headline figures, a per-repository bar chart of
// unique-layer compressed size (A vs B), and the tables of the Markdown
// report.
func WriteHTML(w io.Writer, r *Report) error {
	var b page
	e := html.EscapeString
	b.p("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>swebuild image sizes</title>\n")
	b.p("<style>\n%s</style>\n</head>\n<body>\n", pageCSS)
	b.p("<h1>Image sizes</h1>\n<p class=\"sets\"><span class=\"key\" style=\"background:%s\"></span><b>A</b> <code>%s</code>", colorA, e(r.A.Label))
	if r.B != nil {
		b.p("<br><span class=\"key\" style=\"background:%s\"></span><b>B</b> <code>%s</code>", colorB, e(r.B.Label))
	}
	b.p("</p>\n")
	b.htmlCards(r)
	b.p("<h2>Unique-layer compressed size per repository</h2>\n")
	b.p("<p class=\"note\">Each bar counts a repository's distinct layers once. A layer shared by several repositories (a base image) is in each of their bars, so the bars add up to more than the set's unique total.</p>\n")
	b.p("%s\n", repoChart(r))
	b.p("<h2>Totals</h2>\n<table>\n")
	b.htmlTable(totalsTable(r))
	b.p("</table>\n")
	b.p("<h2>Per repository</h2>\n<table>\n")
	b.htmlTable(reposTable(r))
	b.p("</table>\n")
	for _, s := range sets(r) {
		bad := notMeasured(s.set)
		if len(bad) == 0 {
			continue
		}
		b.p("<h2>Not measured in %s (%d)</h2>\n<table>\n<tr><th>instance</th><th>platform</th><th>status</th><th>detail</th></tr>\n", s.name, len(bad))
		for _, img := range bad {
			b.p("<tr><td>%s</td><td>%s</td><td class=\"%s\">%s</td><td class=\"detail\">%s</td></tr>\n",
				e(img.InstanceID), e(img.Platform.String()), e(img.Status), e(img.Status), e(firstLine(img.Error, 300)))
		}
		b.p("</table>\n")
	}
	b.htmlImages(r)
	b.p("<p class=\"note\">%s</p>\n</body>\n</html>\n", e(UnitsNote))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	return nil
}

// htmlCards writes the headline cards and the growth verdict.
func (b *page) htmlCards(r *Report) {
	e := html.EscapeString
	b.p("<div class=\"cards\">\n")
	card := func(title, value, sub string) {
		b.p("<div class=\"card\"><div class=\"t\">%s</div><div class=\"v\">%s</div><div class=\"s\">%s</div></div>\n", e(title), e(value), e(sub))
	}
	a := r.A.Totals
	card("A unique-layer compressed", HumanBytes(a.UniqueCompressedBytes),
		fmt.Sprintf("%d images measured, naive %s", a.Measured, HumanBytes(a.NaiveCompressedBytes)))
	if r.B != nil {
		bt := r.B.Totals
		card("B unique-layer compressed", HumanBytes(bt.UniqueCompressedBytes),
			fmt.Sprintf("%d images measured, naive %s", bt.Measured, HumanBytes(bt.NaiveCompressedBytes)))
		c := r.Comparison
		card("A / B on common images", fmtRatio(c.Ratios.UniqueCompressed),
			fmt.Sprintf("%d common images, growth %s", c.CommonImages, fmtGrowth(c.GrowthPercent)))
	}
	card("A shared fraction", fmtPercent(a.SharedFraction), "of naive bytes saved by layer sharing")
	b.p("</div>\n")
	if r.MaxGrowthPercent != nil && r.Comparison != nil {
		verdict := growthVerdict(r)
		cls := "ok"
		if r.GrowthExceeded {
			cls = "bad"
		}
		b.p("<p class=\"%s\">Growth %s %s the limit of %.2f%%.</p>\n", cls, e(fmtGrowth(r.Comparison.GrowthPercent)), verdict, *r.MaxGrowthPercent)
	}
}

// htmlTable writes t's rows (the header's first) as HTML, its cells
// escaped.
func (b *page) htmlTable(t table) {
	e := html.EscapeString
	b.p("<tr>")
	for _, h := range t.header {
		b.p("<th>%s</th>", e(h))
	}
	b.p("</tr>\n")
	for _, row := range t.rows {
		b.p("<tr>")
		for _, c := range row {
			b.p("<td>%s</td>", e(c))
		}
		b.p("</tr>\n")
	}
}

// htmlImages writes the collapsed per-image table.
func (b *page) htmlImages(r *Report) {
	e := html.EscapeString
	b.p("<details><summary>Per image (%d)</summary>\n<table>\n", len(r.A.Images))
	b.p("<tr><th>instance</th><th>platform</th><th>A compressed</th><th>A uncompressed</th><th>layers</th><th>shared layers</th>")
	if r.B != nil {
		b.p("<th>B compressed</th><th>A/B</th>")
	}
	b.p("</tr>\n")
	bIdx := imageIndex(r.B)
	for _, img := range r.A.Images {
		b.p("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td>", e(img.InstanceID), e(img.Platform.String()), e(compressedCell(img)),
			e(humanPtr(img.UncompressedBytes)), img.Layers, img.SharedLayers)
		if r.B != nil {
			bComp, rat := againstB(img, bIdx)
			b.p("<td>%s</td><td>%s</td>", e(bComp), e(rat))
		}
		b.p("</tr>\n")
	}
	b.p("</table>\n</details>\n")
}

const pageCSS = `body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #111827; margin: 24px auto; max-width: 1140px; padding: 0 16px; }
h1 { font-size: 26px; margin: 0 0 8px; }
h2 { font-size: 18px; margin: 28px 0 10px; }
code { font-size: 13px; background: #f3f4f6; padding: 1px 4px; border-radius: 3px; }
.sets { line-height: 1.9; margin: 0 0 14px; }
.key { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: -1px; border-radius: 2px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid #d1d5db; border-radius: 8px; padding: 10px 14px; min-width: 200px; flex: 1; }
.card .t { font-size: 13px; color: #4b5563; }
.card .v { font-size: 26px; font-weight: bold; margin: 2px 0; }
.card .s { font-size: 12px; color: #6b7280; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0 8px; }
th, td { border: 1px solid #e5e7eb; padding: 4px 8px; text-align: right; }
th { background: #f9fafb; }
td:first-child, th:first-child { text-align: left; }
td.detail { text-align: left; max-width: 560px; overflow-wrap: anywhere; }
.ok { color: #047857; } .bad, td.error { color: #b91c1c; font-weight: bold; } td.missing { color: #92400e; }
.note { font-size: 12px; color: #4b5563; margin-top: 20px; }
svg text { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
`

// chart geometry (SVG user units; the SVG scales with the page width).
const (
	chartWidth  = 1100
	labelWidth  = 230
	valueWidth  = 170
	barHeight   = 16
	barGap      = 3
	groupGap    = 14
	chartTop    = 44
	chartBottom = 28
)

// repoChart draws one group of horizontal bars per repository: A's
// unique-layer compressed size, and B's under it, on a shared linear axis
// with 1024-based ticks, each bar labelled with its value and the group
// with A/B.
func repoChart(r *Report) string {
	rows := repoRows(r)
	nBars := 1
	if r.B != nil {
		nBars = 2
	}
	var max int64
	for _, row := range rows {
		max = maxInt64(max, maxInt64(row.aBytes, row.bBytes))
	}
	groupH := nBars*barHeight + (nBars-1)*barGap
	height := chartTop + len(rows)*(groupH+groupGap) + chartBottom
	plotW := float64(chartWidth - labelWidth - valueWidth)
	step, unit, unitName := niceStep(max)
	axisMax := step * math.Ceil(float64(max)/step)
	if axisMax <= 0 {
		axisMax = 1
	}
	x := func(v int64) float64 { return float64(labelWidth) + plotW*float64(v)/axisMax }
	e := html.EscapeString
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"100%%\" role=\"img\" aria-label=\"unique-layer compressed size per repository\">\n", chartWidth, height)
	p("<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", chartWidth, height)
	// Legend.
	p("<rect x=\"%d\" y=\"8\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%d\" y=\"20\" font-size=\"14\">A</text>\n", labelWidth, colorA, labelWidth+20)
	if r.B != nil {
		p("<rect x=\"%d\" y=\"8\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%d\" y=\"20\" font-size=\"14\">B</text>\n", labelWidth+60, colorB, labelWidth+80)
		p("<text x=\"%d\" y=\"20\" font-size=\"13\" fill=\"#4b5563\" text-anchor=\"end\">A/B on common images</text>\n", chartWidth-8)
	}
	p("<text x=\"%d\" y=\"20\" font-size=\"12\" fill=\"#4b5563\">axis in %s (1024-based)</text>\n", labelWidth+140, unitName)
	// Grid and ticks.
	bottom := height - chartBottom
	for v := 0.0; v <= axisMax+step/2; v += step {
		gx := float64(labelWidth) + plotW*v/axisMax
		p("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e5e7eb\"/>\n", gx, chartTop-6, gx, bottom)
		p("<text x=\"%.1f\" y=\"%d\" font-size=\"12\" fill=\"#4b5563\" text-anchor=\"middle\">%s</text>\n", gx, bottom+16, trimFloat(v/unit))
	}
	p("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#9ca3af\"/>\n", labelWidth, chartTop-6, labelWidth, bottom)
	for i, row := range rows {
		y := chartTop + i*(groupH+groupGap)
		p("<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"end\">%s</text>\n", labelWidth-8, y+groupH/2+5, e(shorten(row.repo, 28)))
		bar := func(k int, v int64, color, label string) {
			by := y + k*(barHeight+barGap)
			w := x(v) - float64(labelWidth)
			if v > 0 && w < 1 {
				w = 1
			}
			if strings.HasPrefix(label, "not measured") || label == "–" {
				if label == "–" {
					label = "no images"
				}
				p("<text x=\"%d\" y=\"%d\" font-size=\"12\" font-style=\"italic\" fill=\"#6b7280\">%s</text>\n", labelWidth+5, by+barHeight-4, e(label))
				return
			}
			p("<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", labelWidth, by, w, barHeight, color)
			p("<text x=\"%.1f\" y=\"%d\" font-size=\"12\">%s</text>\n", float64(labelWidth)+w+5, by+barHeight-4, e(label))
		}
		bar(0, row.aBytes, colorA, row.aUnique)
		if r.B != nil {
			bar(1, row.bBytes, colorB, row.bUnique)
			p("<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"end\">%s</text>\n", chartWidth-8, y+groupH/2+5, e(row.ratio))
		}
	}
	p("</svg>")
	return b.String()
}

// niceStep picks the axis unit (B, KiB, MiB, GiB, TiB) for max and a tick
// step of 1, 2 or 5 times a power of ten of that unit, giving 4-10 ticks.
func niceStep(max int64) (step, unit float64, unitName string) {
	unit, unitName = 1, "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if float64(max) < unit*1024 {
			break
		}
		unit *= 1024
		unitName = u
	}
	v := float64(max) / unit
	if v <= 0 {
		return unit, unit, unitName
	}
	raw := v / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow * unit, unit, unitName
		}
	}
	return 10 * pow * unit, unit, unitName
}

func trimFloat(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
