package imagediff

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes the report for people: the two manifests, the config
// fields and layers that differ, then every differing file with its cause.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "A %s\n  manifest %s\n  config   %s\n", r.A.Ref, r.A.Manifest, r.A.Config)
	fmt.Fprintf(w, "B %s\n  manifest %s\n  config   %s\n", r.B.Ref, r.B.Manifest, r.B.Config)
	if r.Identical {
		_, err := fmt.Fprintf(w, "identical: the same image manifest (%d layers)\n", len(r.A.Layers))
		return err
	}
	if len(r.Config) > 0 {
		fmt.Fprintf(w, "config differs in %d field(s):\n", len(r.Config))
		for _, c := range r.Config {
			fmt.Fprintf(w, "  %s\n", c)
		}
	} else {
		fmt.Fprintln(w, "config: identical")
	}
	same := 0
	for _, l := range r.Layers {
		if l.Same {
			same++
		}
	}
	fmt.Fprintf(w, "layers: %d of %d identical\n", same, len(r.Layers))
	for _, l := range r.Layers {
		if !l.Same {
			fmt.Fprintf(w, "  layer %d: %s vs %s: %d file(s) differ\n", l.Index, short(trimAlg(l.A)), short(trimAlg(l.B)), l.Files)
		}
	}
	if len(r.Files) == 0 {
		_, err := fmt.Fprintln(w, "files: none differ (the layers differ in tar framing or compression only)")
		return err
	}
	fmt.Fprintf(w, "files that differ: %d\n", len(r.Files))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAYER\tPATH\tWHAT\tA\tB\tCAUSE")
	for _, f := range r.Files {
		what := fmt.Sprint(f.What)
		if f.Only != "" {
			what = "only in " + f.Only
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", f.Layer, f.Path, what, f.A, f.B, orDash(f.Cause))
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func trimAlg(d string) string {
	if len(d) > 7 && d[:7] == "sha256:" {
		return d[7:]
	}
	return d
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
