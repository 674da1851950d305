package render_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/swebuild/swebuild/builder/render"
	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/core"
	"github.com/swebuild/swebuild/pins"
)

// TestPinsApplyToBothVersions renders Verified, Multilingual and Multimodal
// dev with the default pins under the v4.1.0 and the final tables, both
// arches: every pin rule that changes an instance under one version changes
// it under the other.
func TestPinsApplyToBothVersions(t *testing.T) {
	shared := spectest.SharedDir(t)
	set, err := pins.Named("default")
	if err != nil {
		t.Fatal(err)
	}
	renderers := map[string]*render.Renderer{}
	for _, v := range []string{spec.VersionV410, spec.VersionFinal} {
		tables, err := spec.LoadVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		renderers[v] = &render.Renderer{Tables: tables, Pins: set}
	}
	splits := []string{"SWE-bench_Verified/test", "SWE-bench_Multilingual/test", "SWE-bench_Multimodal/dev"}
	perRule := map[string]int{}
	n := 0
	for split, recs := range spectest.Records(t, shared, splits...) {
		for id, inst := range recs {
			var got [2][]*render.Result
			for i, v := range []string{spec.VersionV410, spec.VersionFinal} {
				if got[i], err = renderers[v].RenderArches(context.Background(), inst, core.AllPlatforms()); err != nil {
					t.Fatalf("%s %s (%s): %v", split, id, v, err)
				}
			}
			for a := range got[0] {
				n++
				if !reflect.DeepEqual(got[0][a].Pins, got[1][a].Pins) {
					t.Errorf("%s %s: pins %v under v4.1.0, %v under final", id, got[0][a].Arch(), got[0][a].Pins, got[1][a].Pins)
				}
				for _, p := range got[1][a].Pins {
					perRule[p]++
				}
			}
		}
	}
	if len(perRule) < 5 {
		t.Errorf("only rules %v changed anything", perRule)
	}
	t.Logf("%d renders per version; pinned renders per rule (both versions alike): %v", n, perRule)
}
