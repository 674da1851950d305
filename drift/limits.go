package drift

import (
	"errors"
	"fmt"
	"strings"
)

// CheckLimits is the error of a report over its limits (-1: no limit):
// more than maxDrift distinct package changes (Exceeds), more than
// maxUnrecorded images whose digest changed with nothing recorded
// (Unrecorded); nil when within them.
func (r *Report) CheckLimits(maxDrift, maxUnrecorded int) error {
	var fails []string
	if maxDrift >= 0 {
		if over, msg := r.Exceeds(maxDrift); over {
			fails = append(fails, msg)
		}
	}
	if un := r.Unrecorded(); maxUnrecorded >= 0 && len(un) > maxUnrecorded {
		var names []string
		for _, im := range un {
			names = append(names, im.Label())
		}
		fails = append(fails, fmt.Sprintf("%d image(s) changed digest with nothing recorded (same spec key and pin rules, other packages), more than the %d allowed: %s",
			len(un), maxUnrecorded, strings.Join(names, ", ")))
	}
	if len(fails) > 0 {
		return errors.New(strings.Join(fails, "; "))
	}
	return nil
}
