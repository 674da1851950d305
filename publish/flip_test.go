package publish

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swebuild/swebuild/internal/faultproxy"
	"github.com/swebuild/swebuild/internal/stacktest"
)

// A staging registry whose proxy flips one byte of one layer on every GET
// (issue 20 row 10: the blob was fetched 8 times, a digest mismatch retried
// as transient): the layer is read twice, then that image fails with an
// error naming the blob and the source repository; the other instances
// publish.
func TestWrongBytesFromTheSourceAreReadTwiceThenNamed(t *testing.T) {
	stacktest.Thorough(t)
	r := startTwo(t)
	f := makeFixture(t, []string{"django__django-11099", "psf__requests-2317"}, nil, 4096, 1)
	f.stage(t, r.src.Host, r.srcPx.Host, "staging/build")
	layers, err := f.images["django__django-11099 linux/amd64"].Layers()
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := layers[len(layers)-1].Digest() // the instance's own layer
	r.srcPx.SetConfig(faultproxy.Config{FlipBlob: bad.String()})
	sum := publishOnce(t, r.dstPx.Host, "flip", f, filepath.Join(t.TempDir(), "ledger.jsonl"), 2)
	t.Logf("%s", sum)
	if n := r.srcPx.Stats().FlippedGets; n != 2 {
		t.Errorf("the wrong blob was fetched %d times, want 2", n)
	}
	if sum.ImagesFailed != 1 || sum.ImagesPushed != 3 || sum.IndexesPushed != 1 {
		t.Errorf("summary %+v; want 1 image failed, 3 pushed, 1 index", sum)
	}
	found := false
	for _, msg := range sum.Failures {
		if strings.Contains(msg, bad.String()) && strings.Contains(msg, r.srcPx.Host+"/staging/build") && strings.Contains(msg, "does not match its digest") {
			found = true
		}
	}
	if !found {
		t.Errorf("no failure names blob %s and source %s: %s", bad, r.srcPx.Host+"/staging/build", fmt.Sprint(sum.Failures))
	}
}
