package render

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
)

func benchVerified(b *testing.B) (*Renderer, []core.Instance) {
	shared := spectest.SharedDir(b)
	insts, err := spectest.ReadJSONL(filepath.Join(shared, "datasets", "SWE-bench_Verified", "test.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	tables, err := spec.Load()
	if err != nil {
		b.Fatal(err)
	}
	return &Renderer{Tables: tables}, insts
}

// BenchmarkRenderVerified renders all 500 Verified instances for both arches
// (1,000 renders) per iteration, in memory.
func BenchmarkRenderVerified(b *testing.B) {
	r, insts := benchVerified(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range insts {
			if _, err := r.RenderArches(ctx, &insts[i], core.AllPlatforms()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkRenderMultilingual renders all of SWE-bench Multilingual (300)
// and Multimodal (102) for both arches (804 renders) per iteration, in
// memory, with no pins.
func BenchmarkRenderMultilingual(b *testing.B) {
	shared := spectest.SharedDir(b)
	var insts []core.Instance
	for _, split := range multilingualSplits {
		got, err := spectest.ReadJSONL(filepath.Join(shared, "datasets", split+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		insts = append(insts, got...)
	}
	tables, err := spec.Load()
	if err != nil {
		b.Fatal(err)
	}
	r := &Renderer{Tables: tables}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range insts {
			if _, err := r.RenderArches(ctx, &insts[i], core.AllPlatforms()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkWriteAllVerified renders and writes the 1,000 renders (7,000
// files) per iteration, into $SWEBUILD_BENCH_OUT if set (e.g. a tmpfs), else
// a temp dir.
func BenchmarkWriteAllVerified(b *testing.B) {
	r, insts := benchVerified(b)
	ctx := context.Background()
	base := os.Getenv("SWEBUILD_BENCH_OUT")
	if base == "" {
		base = b.TempDir()
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		out := filepath.Join(base, fmt.Sprintf("writeall-bench-%d-%d", os.Getpid(), i))
		if n, errs := r.WriteAll(ctx, insts, core.AllPlatforms(), out, 0); n != 1000 || len(errs) > 0 {
			b.Fatalf("wrote %d, errors %v", n, errs)
		}
		b.StopTimer()
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkSpecLoad decodes the embedded tables.
func BenchmarkSpecLoad(b *testing.B) {
	for b.Loop() {
		if _, err := spec.Load(); err != nil {
			b.Fatal(err)
		}
	}
}
