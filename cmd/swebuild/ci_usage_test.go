package main

import (
	"bytes"
	"testing"
)

// TestCIRequiredFlags: each ci command that needs a flag says which one,
// first missing first, in the form every command uses ("swebuild ci X:
// --FLAG is required[: why]" and the pointer to --help), with exit status 2,
// before it reads any file.
func TestCIRequiredFlags(t *testing.T) {
	const plan = "/nonexistent/plan.json"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"envs"}, "swebuild ci envs: --plan is required"},
		{[]string{"envs", "--plan", plan}, "swebuild ci envs: --job is required"},
		{[]string{"envs", "--plan", plan, "--job", "j"},
			"swebuild ci envs: --push is required: the instance shards start from the pushed digests"},
		{[]string{"envs", "--plan", plan, "--job", "j", "--push", "r/x"},
			"swebuild ci envs: --metadata-file is required: the instance shards read the env digests from it"},
		{[]string{"contexts"}, "swebuild ci contexts: --plan is required"},
		{[]string{"contexts", "--plan", plan}, "swebuild ci contexts: --instance is required"},
		{[]string{"contexts", "--plan", plan, "--instance", "a__a-1", "--platform", "linux/s390x"},
			"swebuild ci contexts: --platform: "},
		{[]string{"merge"}, "swebuild ci merge: --plan is required"},
		{[]string{"repair"}, "swebuild ci repair: --plan is required"},
		{[]string{"repair", "--plan", plan}, "swebuild ci repair: --env-ledger is required: last night's env images come from it"},
		{[]string{"repair", "--plan", plan, "--env-ledger", "l"}, "swebuild ci repair: --push is required: the repaired images are published from it"},
		{[]string{"repair", "--plan", plan, "--env-ledger", "l", "--push", "r/x", "--envs", "e"},
			"swebuild ci repair: --results and --envs are required: tonight's gold results and env images"},
		{[]string{"matrix"}, "swebuild ci matrix: exactly one of --dataset, --task-repo and --ids is required"},
		{[]string{"matrix", "--ids", "x", "--env-shards", "0"}, "swebuild ci matrix: --env-shards 0: want at least 1"},
		{[]string{"ids", "--ids", "a", "--ids-file", "f"}, "swebuild ci ids: only one of --ids and --ids-file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"ci"}, tc.args...), &stdout, &stderr)
		got := stderr.String()
		suffix := "\nSee 'swebuild ci " + tc.args[0] + " --help'.\n"
		if code != 2 || len(got) < len(tc.want) || got[:len(tc.want)] != tc.want || !bytes.HasSuffix(stderr.Bytes(), []byte(suffix)) {
			t.Errorf("ci %v: exit %d, stderr %q; want exit 2 and %q...%q", tc.args, code, got, tc.want, suffix)
		}
		if tc.want[len(tc.want)-1] != ' ' && got != tc.want+suffix {
			t.Errorf("ci %v: stderr %q, want %q", tc.args, got, tc.want+suffix)
		}
	}
}
