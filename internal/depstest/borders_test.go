package depstest

import "testing"

const m = "github.com/swebuild/swebuild"

// TestBorders: the house's borders (docs/architecture.md), each with a
// control package that crosses it. Grading is a pure function of a log
// and a core.Instance (issues 13, 27); rendering does no network I/O (its
// repository files come resolved); the runner asks for a context digest
// through ctxdigest, not the builder; the registry client and the
// publication reader link no gRPC or BuildKit (registry/bkauth holds
// BuildKit's session auth); publishing and the reports link no BuildKit.
func TestBorders(t *testing.T) {
	const (
		buildkit = "github.com/moby/buildkit"
		ggcr     = "github.com/google/go-containerregistry"
		grpc     = "google.golang.org/grpc"
		parquet  = "github.com/parquet-go/parquet-go"
	)
	Check(t, []Border{
		{Pkg: m + "/grading", Control: m + "/verify", Banned: []string{buildkit, ggcr, m + "/dataset", parquet, "net/http"}},
		{Pkg: m + "/builder/render", Control: m + "/pipeline", Banned: []string{"net/http", m + "/fetch", m + "/dataset", parquet}},
		{Pkg: m + "/builder/render/taskwrite", Control: m + "/pipeline", Banned: []string{"net/http", m + "/fetch", m + "/dataset", parquet}},
		{Pkg: m + "/builder/plan", Control: m + "/pipeline", Banned: []string{"net/http", m + "/fetch", m + "/dataset", parquet}},
		{Pkg: m + "/verify", Control: m + "/pipeline", Banned: []string{m + "/builder=", m + "/dataset", m + "/fetch"}},
		{Pkg: m + "/registry", Control: m + "/registry/bkauth", Banned: []string{grpc, buildkit}},
		{Pkg: m + "/publication", Control: m + "/registry/bkauth", Banned: []string{grpc, buildkit}},
		{Pkg: m + "/publish", Control: m + "/builder", Banned: []string{buildkit, parquet}},
		{Pkg: m + "/check", Control: m + "/builder", Banned: []string{buildkit, parquet}},
		{Pkg: m + "/drift", Control: m + "/builder", Banned: []string{buildkit, grpc, parquet}},
		{Pkg: m + "/ci", Control: m + "/builder", Banned: []string{buildkit, grpc, parquet}},
		{Pkg: m + "/sizes", Control: m + "/builder", Banned: []string{buildkit, grpc}},
	})
}
