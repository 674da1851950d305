package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/builder/spec/spectest"
	"github.com/swebuild/swebuild/pins"
)

// TestPinsListCounts: pins list --dataset counts per rule and says how to
// turn each off. Multimodal dev (102 JavaScript instances, README and
// docs/pins.md): the Chrome and pnpm rules change every arm64 recipe and no
// x86_64 one, 15 p5.js instances are x86-only by puppeteer's Chromium.
func TestPinsListCounts(t *testing.T) {
	ds := filepath.Join(spectest.SharedDir(t), "datasets", "SWE-bench_Multimodal", "dev.jsonl")
	var stdout, stderr bytes.Buffer
	if err := runPins(context.Background(), []string{"list", "--dataset", ds}, &stdout, &stderr); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	for _, want := range []string{
		"turn off: --pins default,-arm64-chrome-apt\ntouches:  " + ds + ": 102 of 102 instances (x86_64 0, arm64 102)\n",
		"turn off: --pins default,-arm64-pnpm-binary\ntouches:  " + ds + ": 102 of 102 instances (x86_64 0, arm64 102)\n",
		"turn off: --pins default,-conda-channels-tos\ntouches:  " + ds + ": 0 of 102 instances (x86_64 0, arm64 0)\n",
		"lift:     --pins default,-puppeteer-bundled-chromium (plans and builds their linux/arm64 images, to try them)\ntouches:  " + ds + ": 15 of 102 instances\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("pins list lacks %q", want)
		}
	}
	stdout.Reset()
	if err := runPins(context.Background(), []string{"list", "--format", "json", "--dataset", ds}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Counts []struct {
			Instances int            `json:"instances"`
			Touched   []pins.Touched `json:"touched"`
		} `json:"counts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Counts) != 1 || out.Counts[0].Instances != 102 {
		t.Fatalf("json counts: %v %+v", err, out)
	}
}
