package ci

import (
	"fmt"
	"io"
	"strings"

	"github.com/swebuild/swebuild/core"
)

// WriteText writes what `ci merge` says on stdout: the counts, the base
// and env images built inside instance shards, then each image error of
// the regressed and failed instances.
func (r MergeReport) WriteText(w io.Writer) {
	c := r.Counts
	fmt.Fprintf(w, "%d instances: %d to index, %d unchanged, %d regressed, %d failed\n", c.Instances, c.Indexed, c.Unchanged, c.Regressed, c.Failed)
	fmt.Fprintf(w, "%d base/env images built inside instance shards (0 when every shard started from the env stage)\n", len(r.BuiltInShards))
	for _, b := range r.BuiltInShards {
		fmt.Fprintf(w, "  built in a shard: %s\n", b)
	}
	for _, o := range r.Outcomes {
		if o.Status != StatusRegressed && o.Status != StatusFailed {
			continue
		}
		for _, img := range o.Images {
			if img.Error != "" {
				fmt.Fprintf(w, "%s %s %s: %s\n", strings.ToUpper(o.Status), o.InstanceID, img.Platform, img.Error)
			}
		}
	}
}

// GitHubOutput are `ci merge`'s output lines for $GITHUB_OUTPUT.
func (r MergeReport) GitHubOutput() string {
	return fmt.Sprintf("indexed=%d\nregressed=%d\nfailed=%d\n", r.Counts.Indexed, r.Counts.Regressed, r.Counts.Failed)
}

// Err is the error of a run that regressed or failed, nil otherwise.
func (r MergeReport) Err() error {
	if !r.Failed() {
		return nil
	}
	return fmt.Errorf("%d regressed, %d failed", r.Counts.Regressed, r.Counts.Failed)
}

// WritePublishMetadata writes the publish metadata of the instances to
// index (PublishRecords) to path: what it could gather is written even
// when some instance has no usable record, and that is then the error.
func (r MergeReport) WritePublishMetadata(path string) error {
	pub, err := r.PublishRecords()
	if werr := core.WriteFile(path, pub); werr != nil {
		return werr
	}
	return err
}
