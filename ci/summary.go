package ci

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// SummaryOptions adds what the merge report does not hold.
type SummaryOptions struct {
	// Title heads the summary; empty means "swebuild nightly".
	Title string
	// Sizes is the Markdown from `swebuild sizes --format md`, if any.
	Sizes string
	// SizesFailed is true when the sizes step reported growth over the limit
	// (or failed): that is a regression too.
	SizesFailed bool
	// Drift is the Markdown from `swebuild drift --format md` (its own
	// heading line is replaced by the summary's), if any.
	Drift string
	// DriftFailed is true when the drift step found more package changes
	// than --max-drift allows, or could not read a document.
	DriftFailed bool
	// Repair is the Markdown of the night's repair (`ci repair`'s
	// report.md), if any: shown after the regressions, under "Repair".
	Repair string
	// MaxListed caps the rows of each list; 0 means 200. GitHub caps a step
	// summary at 1 MiB.
	MaxListed int
}

// RunFailed reports whether the run must fail: a regression, a new failure,
// size growth over the limit or environment drift over the limit.
func (o SummaryOptions) RunFailed(r MergeReport) bool {
	return r.Failed() || o.SizesFailed || o.DriftFailed
}

// WriteSummary writes the job summary in Markdown: the verdict, then
// regressions, then new failures, then size growth, then the counts and the
// indexed instances.
func WriteSummary(w io.Writer, r MergeReport, opts SummaryOptions) error {
	bw := bufio.NewWriter(w)
	title := opts.Title
	if title == "" {
		title = "swebuild nightly"
	}
	maxListed := opts.MaxListed
	if maxListed == 0 {
		maxListed = 200
	}
	fmt.Fprintf(bw, "## %s: %s\n\n", title, opts.verdict(r))
	flaky := ""
	if r.Counts.Flaky > 0 {
		flaky = fmt.Sprintf(" (%d of them flaky, labelled)", r.Counts.Flaky)
	}
	fmt.Fprintf(bw, "%d instances: %d indexed%s, %d unchanged, %d regressed, %d failed.\n\n",
		r.Counts.Instances, r.Counts.Indexed, flaky, r.Counts.Unchanged, r.Counts.Regressed, r.Counts.Failed)

	writeProblems(bw, r, StatusRegressed, "Regressions (verified before, failing now)", maxListed)
	writeProblems(bw, r, StatusFailed, "Failures (never verified)", maxListed)
	writeFlaky(bw, r, maxListed)

	if s := strings.TrimSpace(opts.Repair); s != "" {
		fmt.Fprintf(bw, "### Repair\n\n%s\n\n", s)
	}
	opts.writeChecks(bw)
	if len(r.Shards) > 0 {
		fmt.Fprintf(bw, "### Work per platform\n\n| platform | wanted | already in registry | built | shards |\n|---|---:|---:|---:|---:|\n")
		for _, c := range r.Shards {
			fmt.Fprintf(bw, "| %s | %d | %d | %d | %d |\n", c.Platform, c.Wanted, c.Skipped, c.ToBuild, c.Shards)
		}
		fmt.Fprintln(bw)
	}
	writeIndexed(bw, r, maxListed)
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(bw, "Ignored %s no plan target asked for (first: %s).\n\n", plural(len(r.Unexpected), "result", "results"), mdCell(r.Unexpected[0]))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

// verdict is the summary's verdict: "passed", or "FAILED: " and why.
func (o SummaryOptions) verdict(r MergeReport) string {
	if !o.RunFailed(r) {
		return "passed"
	}
	var why []string
	if n := r.Counts.Regressed; n > 0 {
		why = append(why, plural(n, "regression", "regressions"))
	}
	if n := r.Counts.Failed; n > 0 {
		why = append(why, plural(n, "new failure", "new failures"))
	}
	if o.SizesFailed {
		why = append(why, "size growth over the limit")
	}
	if o.DriftFailed {
		why = append(why, "environment drift over the limit")
	}
	return "FAILED: " + strings.Join(why, ", ")
}

// writeChecks writes the sizes and drift sections, when there are reports
// or the checks failed (the drift report without its own heading).
func (o SummaryOptions) writeChecks(bw io.Writer) {
	if o.Sizes != "" || o.SizesFailed {
		fmt.Fprintf(bw, "### Sizes\n\n")
		if o.SizesFailed {
			fmt.Fprintf(bw, "**Size check failed.**\n\n")
		}
		if s := strings.TrimSpace(o.Sizes); s != "" {
			fmt.Fprintf(bw, "%s\n\n", s)
		}
	}
	if o.Drift != "" || o.DriftFailed {
		fmt.Fprintf(bw, "### Environment drift\n\n")
		if o.DriftFailed {
			fmt.Fprintf(bw, "**Drift check failed.**\n\n")
		}
		d := strings.TrimSpace(o.Drift)
		if strings.HasPrefix(d, "#") {
			_, d, _ = strings.Cut(d, "\n")
		}
		if d = strings.TrimSpace(d); d != "" {
			fmt.Fprintf(bw, "%s\n\n", d)
		}
	}
}

// writeIndexed lists the indexed instances (at most maxListed) with their
// images, collapsed.
func writeIndexed(bw io.Writer, r MergeReport, maxListed int) {
	var indexed []Outcome
	for _, o := range r.Outcomes {
		if o.Status == StatusIndexed {
			indexed = append(indexed, o)
		}
	}
	if len(indexed) == 0 {
		return
	}
	fmt.Fprintf(bw, "<details><summary>Indexed (%d)</summary>\n\n| instance | images |\n|---|---|\n", len(indexed))
	for i, o := range indexed {
		if i == maxListed {
			fmt.Fprintf(bw, "| … | %d more |\n", len(indexed)-maxListed)
			break
		}
		var imgs []string
		for _, img := range o.Images {
			imgs = append(imgs, fmt.Sprintf("%s `%s` (%s)", img.Platform, shortDigest(img.Digest.String()), img.Source))
		}
		fmt.Fprintf(bw, "| `%s` | %s |\n", o.InstanceID, strings.Join(imgs, "<br>"))
	}
	fmt.Fprintf(bw, "\n</details>\n\n")
}

// writeFlaky lists the indexed instances whose gold patch was flaky: each
// image with its flaky tests and how often each failed. They are published
// labelled (the index's io.swebuild.gold=flaky), never as verified.
func writeFlaky(w io.Writer, r MergeReport, maxListed int) {
	var rows []string
	for _, o := range r.Outcomes {
		if !o.Flaky {
			continue
		}
		for _, img := range o.Images {
			if !img.IsFlaky() {
				continue
			}
			var fs []string
			for _, f := range img.Flaky {
				fs = append(fs, fmt.Sprintf("`%s` failed %d/%d", mdCell(f.Test), f.Failed, f.Runs))
			}
			rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", o.InstanceID, img.Platform, strings.Join(fs, "<br>")))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### Flaky gold (%s; published labelled flaky, not verified)\n\n| instance | platform | flaky tests |\n|---|---|---|\n", plural(len(rows), "image", "images"))
	for i, row := range rows {
		if i == maxListed {
			fmt.Fprintf(w, "| … | | %d more |\n", len(rows)-maxListed)
			break
		}
		fmt.Fprintln(w, row)
	}
	fmt.Fprintln(w)
}

func writeProblems(w io.Writer, r MergeReport, status, heading string, maxListed int) {
	var rows []string
	total := 0
	for _, o := range r.Outcomes {
		if o.Status != status {
			continue
		}
		for _, img := range o.Images {
			if img.Error == "" {
				continue
			}
			total++
			if len(rows) < maxListed {
				rows = append(rows, fmt.Sprintf("| `%s` | %s | %s | %s |", o.InstanceID, img.Platform, mdCell(img.Shard), mdCell(img.Error)))
			}
		}
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "### %s: %d\n\n| instance | platform | shard | what failed |\n|---|---|---|---|\n", heading, total)
	for _, row := range rows {
		fmt.Fprintln(w, row)
	}
	if total > len(rows) {
		fmt.Fprintf(w, "| … | | | %d more |\n", total-len(rows))
	}
	fmt.Fprintln(w)
}

// mdCell makes text safe for one Markdown table cell.
func mdCell(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`).Replace(s)
	const maxLen = 300
	if r := []rune(s); len(r) > maxLen {
		s = string(r[:maxLen]) + "…"
	}
	return s
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
