package ci

import (
	"strings"
	"testing"
)

// TestNightlyLedgerInRegistry (issue 20 row 14): no ledger of the nightly is
// kept only in an Actions cache entry (evicted after 7 days unused, and a
// miss silently rebuilds and re-verifies everything). Every job that reads a
// ledger pulls it from the target repository after logging in and before
// `ci matrix`/`publish` read it; the merge job pushes both back, the publish
// ledger even when publish failed (what landed is recorded).
func TestNightlyLedgerInRegistry(t *testing.T) {
	jobs := readNightly(t)
	for name, j := range jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/cache/") {
				if p := toString(s.With["path"]); strings.Contains(p, "ledger") || strings.Contains(p, "envs.jsonl") {
					t.Errorf("job %s step %q: a ledger in an Actions cache entry (%v)", name, s.Name, p)
				}
			}
		}
	}
	index := func(j wfJob, what string) int {
		for i, s := range j.Steps {
			if strings.Contains(s.Run, what) || strings.Contains(s.Uses, what) {
				return i
			}
		}
		return -1
	}
	for _, tc := range []struct{ job, reader string }{
		{"prepare", "ci matrix"},
		{"merge", "swebuild publish"},
	} {
		j, ok := jobs[tc.job]
		if !ok {
			t.Fatalf("no %s job", tc.job)
		}
		login, read := index(j, "docker/login-action@"), index(j, tc.reader)
		pl := index(j, `ci ledger pull --repo "$REPO" --file state/ledger.jsonl`)
		pe := index(j, `ci ledger pull --repo "$REPO" --tag swebuild-envs-ledger --file state/envs.jsonl`)
		if pl < 0 || pe < 0 {
			t.Errorf("%s: the ledger (step %d) and env ledger (step %d) are not pulled from the registry", tc.job, pl, pe)
			continue
		}
		if login < 0 || pl < login || pe < login || read < 0 || pl > read || pe > read {
			t.Errorf("%s: login step %d, pulls %d/%d, %s step %d: want login, then the pulls, then the reader", tc.job, login, pl, pe, tc.reader, read)
		}
	}
	m := jobs["merge"]
	pub := index(m, "swebuild publish")
	push := index(m, `ci ledger push --repo "$REPO" --file state/ledger.jsonl`)
	if push < 0 || push < pub || !strings.Contains(m.Steps[push].If, "always()") {
		t.Errorf("merge: the ledger is not pushed after publish whatever publish did (step %d, publish %d)", push, pub)
	}
	keep := index(m, ">> state/envs.jsonl")
	pushEnv := index(m, `ci ledger push --repo "$REPO" --tag swebuild-envs-ledger --file state/envs.jsonl`)
	if pushEnv < 0 || pushEnv < keep {
		t.Errorf("merge: tonight's env ledger is not pushed after it is extended (step %d, extended %d)", pushEnv, keep)
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
