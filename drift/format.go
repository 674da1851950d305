package drift

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/internal/reportfmt"
)

// formats are the output formats Write accepts, by name.
var formats = []reportfmt.Format[*Report]{{Name: "md", Write: WriteMarkdown}, {Name: "json", Write: WriteJSON}, {Name: "html", Write: WriteHTML}}

// Formats lists the output formats Write accepts.
var Formats = reportfmt.Names(formats)

// Write renders the report in one of Formats; the same report gives the
// same bytes.
func Write(w io.Writer, r *Report, format string) error {
	return reportfmt.Write(w, r, format, formats)
}

// WriteJSON writes the report as indented JSON: the Report type's fields,
// its shape named by Schema (docs/drift.md).
func WriteJSON(w io.Writer, r *Report) error {
	return reportfmt.JSON(w, r)
}

// mdCell escapes a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// Markdown list bounds: a job summary is capped at 1 MiB by GitHub.
const (
	mdImagesPerChange = 20  // image labels in one change's row
	mdListed          = 100 // rows of each list (changes, no document, one set only)
)

// WriteMarkdown writes what the nightly's job summary shows: the counts,
// one table row per change with the images showing it, and the images
// without a document or in one set only. Unchanged images are counted,
// not listed. Long lists are cut (mdListed rows, mdImagesPerChange images
// per change), saying how many more; the JSON report has them all.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s := r.Summary
	p("## Environment drift\n\n")
	p("A: `%s`  \nB: `%s`\n\n", r.A, r.B)
	p("%d images compared: %d unchanged, %d with drift, %d without a document, %d only in A, %d only in B. ",
		s.Images, s.Unchanged, s.Drifted, s.NoDocument, s.OnlyA, s.OnlyB)
	p("%d distinct package changes (%d image-package changes).\n\n", s.Changes, s.ImageChanges)
	if len(r.Groups) > 0 {
		p("| package | A | B | images |\n|---|---|---|---|\n")
		for i, g := range r.Groups {
			if i == mdListed {
				p("| … | | | %d more changes |\n", len(r.Groups)-mdListed)
				break
			}
			imgs := g.Images
			more := ""
			if len(imgs) > mdImagesPerChange {
				more = fmt.Sprintf(" and %d more", len(imgs)-mdImagesPerChange)
				imgs = imgs[:mdImagesPerChange]
			}
			p("| `%s` | %s | %s | %d: %s%s |\n", mdCell(g.Key), mdCell(orDash(g.From)), mdCell(orDash(g.To)),
				len(g.Images), mdCell(strings.Join(imgs, ", ")), more)
		}
		p("\n")
	} else if s.Drifted == 0 {
		p("No package changed.\n\n")
	}
	if len(s.Causes) > 0 {
		writeCauses(&b, r)
	}
	var nodoc, only []ImageResult
	for _, im := range r.Images {
		switch im.Status {
		case StatusNoDoc:
			nodoc = append(nodoc, im)
		case StatusOnlyA, StatusOnlyB:
			only = append(only, im)
		}
	}
	mdImageList(&b, "**Without an environment document** (not compared):\n\n", nodoc, func(im ImageResult) string {
		why := ""
		for _, w := range []string{im.WhyA, im.WhyB} {
			if w != "" {
				why += " (" + mdCell(w) + ")"
			}
		}
		return fmt.Sprintf("%s: none in %s%s", mdCell(im.Label()), missingSides(im.Missing), why)
	})
	mdImageList(&b, "**In one set only:**\n\n", only, func(im ImageResult) string {
		side := "A"
		if im.Status == StatusOnlyB {
			side = "B"
		}
		return fmt.Sprintf("%s: only in %s", mdCell(im.Label()), side)
	})
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing Markdown report: %w", err)
	}
	return nil
}

// mdImageList writes heading and a list item for each image (item's text),
// at most mdListed of them, when there are any.
func mdImageList(b *strings.Builder, heading string, ims []ImageResult, item func(ImageResult) string) {
	if len(ims) == 0 {
		return
	}
	b.WriteString(heading)
	for i, im := range ims {
		if i == mdListed {
			fmt.Fprintf(b, "- … %d more\n", len(ims)-mdListed)
			break
		}
		fmt.Fprintf(b, "- %s\n", item(im))
	}
	b.WriteString("\n")
}

// causeOrder lists the causes as the Markdown counts them.
var causeOrder = []string{CauseRepair, CausePin, CauseSpec, CauseRebuild, CauseUnrecorded, CauseUnknown}

// writeCauses says why each digest that changed did: the counts, then one
// row per image, the unrecorded ones first.
func writeCauses(b *strings.Builder, r *Report) {
	var counts []string
	total := 0
	for _, c := range causeOrder {
		if n := r.Summary.Causes[c]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, c))
			total += n
		}
	}
	fmt.Fprintf(b, "**Digests changed: %d** (%s).", total, strings.Join(counts, ", "))
	if n := r.Summary.Causes[CauseUnrecorded]; n > 0 {
		fmt.Fprintf(b, " **%d changed with nothing recorded** (same spec key and rules, other packages).", n)
	}
	b.WriteString("\n\n| image | cause | what |\n|---|---|---|\n")
	var rows []ImageResult
	for _, im := range r.Images {
		if im.Cause == CauseUnrecorded {
			rows = append(rows, im)
		}
	}
	for _, im := range r.Images {
		if im.Cause != "" && im.Cause != CauseUnrecorded {
			rows = append(rows, im)
		}
	}
	for i, im := range rows {
		if i == mdListed {
			fmt.Fprintf(b, "| … | | %d more |\n", len(rows)-mdListed)
			break
		}
		c := im.Cause
		if c == CauseUnrecorded {
			c = "**" + c + "**"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", mdCell(im.Label()), c, mdCell(im.CauseDetail))
	}
	b.WriteString("\n")
}

func missingSides(m string) string {
	switch m {
	case "a":
		return "A"
	case "b":
		return "B"
	}
	return "A and B"
}

// page is parsed on first use: a template parsed at package init costs
// every swebuild process's start-up (GODEBUG=inittrace=1).
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("drift").Funcs(template.FuncMap{
		"dash":    orDash,
		"sides":   missingSides,
		"join":    strings.Join,
		"changes": func(cs []Change) string { return joinChanges(cs) },
	}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>swebuild environment drift</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#111}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f4f6}
code{font-size:.95em}
.drift{color:#b91c1c}.nodoc{color:#a16207}.ok{color:#15803d}
</style>
</head>
<body>
<h1>Environment drift</h1>
<p>A <code>{{.A}}</code><br>B <code>{{.B}}</code></p>
{{with .Summary}}<p>{{.Images}} images compared: <span class="ok">{{.Unchanged}} unchanged</span>, <span class="drift">{{.Drifted}} with drift</span>, <span class="nodoc">{{.NoDocument}} without a document</span>, {{.OnlyA}} only in A, {{.OnlyB}} only in B. {{.Changes}} distinct package changes ({{.ImageChanges}} image-package changes).</p>{{end}}
{{if .Groups}}<h2>Changes</h2>
<table><tr><th>package</th><th>A</th><th>B</th><th>images</th></tr>
{{range .Groups}}<tr><td><code>{{.Key}}</code></td><td>{{dash .From}}</td><td>{{dash .To}}</td><td>{{len .Images}}: {{join .Images ", "}}</td></tr>
{{end}}</table>{{end}}
<h2>Images</h2>
<table><tr><th>kind</th><th>name</th><th>platform</th><th>status</th><th>packages A / B</th><th>changes</th><th>digest changed: cause</th></tr>
{{range .Images}}<tr><td>{{.Kind}}</td><td><code>{{.Name}}</code>{{if .NameB}} / <code>{{.NameB}}</code>{{end}}</td><td>{{.Platform}}</td><td class="{{if eq .Status "drift"}}drift{{else if eq .Status "no-document"}}nodoc{{else if eq .Status "unchanged"}}ok{{end}}">{{.Status}}{{if .Missing}} (none in {{sides .Missing}}{{with .WhyA}}: A {{.}}{{end}}{{with .WhyB}}: B {{.}}{{end}}){{end}}</td><td>{{.PackagesA}} / {{.PackagesB}}</td><td>{{changes .Changes}}</td><td>{{.Cause}}{{with .CauseDetail}}: {{.}}{{end}}</td></tr>
{{end}}</table>
</body>
</html>
`))
})

func joinChanges(cs []Change) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return strings.Join(s, "; ")
}

// WriteHTML writes one self-contained page (inline CSS, no scripts, no
// external resources): the counts, the changes with their images, and
// every image with its status.
func WriteHTML(w io.Writer, r *Report) error {
	if err := page().Execute(w, r); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	return nil
}
