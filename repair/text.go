package repair

import (
	"fmt"
	"io"
	"time"
)

// WriteText writes the report's lines for a terminal: the cases, each
// one's verdict or error and the rule it got, then the proposal.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "repair: %d env(s) to repair, %.0f s\n", len(r.Cases), r.Seconds)
	for _, c := range r.Cases {
		switch {
		case c.Error != "":
			fmt.Fprintf(w, "%s: no result: %s\n", c.Name(), c.Error)
		case c.Result != nil:
			fmt.Fprintf(w, "%s: %s: %s (%d env rebuilds, %.0f s)\n", c.Name(), c.Result.Verdict, c.Result.Reason, c.Result.Rebuilds, c.Result.Seconds)
		}
		if c.Rule != "" {
			fmt.Fprintf(w, "%s: rule %s, %d image(s) repaired and verified\n", c.Name(), c.Rule, len(c.Repaired))
		}
	}
	if r.Proposal != "" {
		fmt.Fprintf(w, "proposal: %s\n", r.Proposal)
	}
}

// NightName is the default name of a night in the evidence: its UTC time,
// and its GitHub Actions run id when there is one.
func NightName(now time.Time, runID string) string {
	night := now.UTC().Format(time.RFC3339)
	if runID != "" {
		night += " (run " + runID + ")"
	}
	return night
}
