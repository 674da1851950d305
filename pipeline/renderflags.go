package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/swebuild/swebuild/builder/render/taskwrite"
	"github.com/swebuild/swebuild/core"
)

// ParseArches reads --arch values: x86_64, arm64 (also amd64, aarch64,
// linux/...), all, repeated or comma-separated; the platforms come in
// index order.
func ParseArches(vals []string) ([]core.Platform, error) {
	var list []core.Platform
	for _, v := range vals {
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if a == "all" {
				list = append(list, core.AllPlatforms()...)
				continue
			}
			p, err := core.ParsePlatform(a)
			if err != nil {
				return nil, fmt.Errorf("--arch %q: want x86_64, arm64 or all", a)
			}
			list = append(list, p)
		}
	}
	if len(list) == 0 {
		return nil, errors.New("--arch is required (x86_64, arm64 or all)")
	}
	return core.PlatformSet(list)
}

// TaskRepoOptions say where and as what `render --task-repo-out` writes
// the records as a task repo.
type TaskRepoOptions struct {
	// Out is the task repo's directory; Dataset and Split name what its
	// sweb.yaml publishes (default: the hub dataset's name and split, else
	// split test); Platform is the arch its Dockerfiles are for.
	Out, Dataset, Split string
	Platform            core.Platform
}

// ErrNoTaskRepoDataset is WriteTaskRepo's error for a dataset file and
// no dataset name.
var ErrNoTaskRepoDataset = errors.New("--task-repo-dataset is required for a dataset file")

// WriteTaskRepo writes the records as a task repo (ExportTasks), each
// failed task said on log, the count on out.
func (l *Loaded) WriteTaskRepo(ctx context.Context, o TaskRepoOptions, out, log io.Writer) error {
	name, split := o.Dataset, o.Split
	if src := l.Source; src.FromHub() {
		name = cmp.Or(name, src.Name)
		split = cmp.Or(split, src.Split)
	}
	if name == "" {
		return fmt.Errorf("%w (%s)", ErrNoTaskRepoDataset, l.Source)
	}
	n, failed := l.ExportTasks(ctx, taskwrite.Options{
		Out: o.Out, Datasets: []string{name}, Split: cmp.Or(split, "test"), Platform: o.Platform,
	})
	for _, e := range failed {
		fmt.Fprintf(log, "render: task repo: %v\n", e)
	}
	fmt.Fprintf(out, "wrote %d of %d tasks into the task repo %s\n", n, len(l.Instances), o.Out)
	if len(failed) > 0 {
		return fmt.Errorf("%d task(s) failed", len(failed))
	}
	return nil
}
