package render

import (
	"strings"
	"testing"
)

// TestImageAssetsBlockEdges covers what make_v5_dockerfiles.py's
// image_assets_block does with records the golden data has none of:
// invalid JSON or no usable asset gives no block (json.loads fails, or
// any_asset stays false), a JSON value that is not an object fails (upstream
// raises on .get), entries without a URL are skipped, a dict's path wins over
// the URL's last segment, and a quote (which would break the shell line) is
// an error here.
func TestImageAssetsBlockEdges(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      []string // lines the block must hold; nil: no block
		err       string
	}{
		{"none", "", nil, ""},
		{"invalid JSON", "{not json", nil, ""},
		{"empty lists", `{"problem_statement": [], "patch": null}`, nil, ""},
		{"not an object", `["https://x/a.png"]`, nil, "want a JSON object"},
		{"no url", `{"test_patch": [{"path": "a.png"}, {"url": ""}]}`, nil, ""},
		{"path wins", `{"test_patch": [{"path": "docs/a.png", "url": "https://x/b.png"}]}`,
			[]string{"curl -fsSL -o '/swebench/image_assets/test_patch/docs/a.png' 'https://x/b.png' || true"}, ""},
		{"last segment", `{"problem_statement": ["https://x/y/c.gif/"]}`,
			[]string{"mkdir -p $(dirname '/swebench/image_assets/problem_statement/c.gif')"}, ""},
		{"quote", `{"patch": ["https://x/it's.png"]}`, nil, "quote"},
		{"list of lists", `{"patch": "https://x/a.png"}`, nil, "want a list"},
	} {
		got, err := imageAssetsBlock(tc.raw)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == nil && got != "":
			t.Errorf("%s: block %q, want none", tc.name, got)
		case tc.want != nil && !strings.HasPrefix(got, "RUN <<EOF_"):
			t.Errorf("%s: block %q", tc.name, got)
		}
		for _, l := range tc.want {
			if !strings.Contains(got, "\n"+l+"\n") {
				t.Errorf("%s: block lacks %q:\n%s", tc.name, l, got)
			}
		}
	}
}
