package pipeline

import (
	"testing"

	"github.com/swebuild/swebuild/builder"
)

// TestBuilderFlagsWithoutEpochFlag: the ci commands that build (ci envs,
// ci repair) have no --source-date-epoch; their builder options are not
// refused for a flag nobody gave (on main before this, every `ci envs` of
// the nightly stopped with "--source-date-epoch is only used with
// --reproducible").
func TestBuilderFlagsWithoutEpochFlag(t *testing.T) {
	f := BuilderFlags{Workers: 2, Progress: "plain", DownAfter: builder.DefaultDownAfter}
	if _, err := f.Options(); err != nil {
		t.Errorf("builder options of a command without --source-date-epoch: %v", err)
	}
	f.SourceDateEpoch = "5"
	if _, err := f.Options(); err == nil {
		t.Error("--source-date-epoch 5 without --reproducible accepted")
	}
}
