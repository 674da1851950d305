package dataset

import (
	"fmt"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// Select returns the instances whose ids are in ids, in dataset order. It
// fails, naming them, when some ids are not in the dataset. An empty ids
// selects every instance.
func Select(instances []core.Instance, ids []string) ([]core.Instance, error) {
	if len(ids) == 0 {
		return instances, nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = false
	}
	out := make([]core.Instance, 0, len(want))
	for i := range instances {
		if _, ok := want[instances[i].InstanceID]; ok {
			want[instances[i].InstanceID] = true
			out = append(out, instances[i])
		}
	}
	var missing []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids { // in the order asked for
		if !want[id] && !seen[id] {
			seen[id] = true
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("%d instance id(s) not in the dataset: %s", len(missing), strings.Join(missing, ", "))
	}
	return out, nil
}
