package pipeline

import (
	"encoding/json"
	"fmt"
	"io"
)

// Write writes the plan to w as a table or, with asJSON, as indented JSON;
// in JSON the instances that could not be planned are said on log too
// (the table lists them itself).
func (p *Plan) Write(w, log io.Writer, asJSON bool) error {
	if !asJSON {
		if err := p.WriteTable(w); err != nil {
			return fmt.Errorf("writing plan: %w", err)
		}
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return fmt.Errorf("writing plan: %w", err)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(log, "plan: %s (%s): %s\n", e.InstanceID, e.Platform, e.Error)
	}
	return nil
}

// Err is the error of a plan some instances of which could not be
// planned, after loadErr (the input's, when some records were bad); nil
// when there is neither.
func (p *Plan) Err(loadErr error) error {
	switch {
	case len(p.Errors) == 0:
		return loadErr
	case loadErr != nil:
		return fmt.Errorf("%w; %d instance(s) could not be planned", loadErr, len(p.Errors))
	}
	return fmt.Errorf("%d instance(s) could not be planned", len(p.Errors))
}
