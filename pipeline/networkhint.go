package pipeline

import (
	"fmt"
	"io"
	"path/filepath"
)

// WriteNetworkHint says, after command cmd rendered the instances, which
// files could not be downloaded because their host gave no answer, and how
// to do without the network (cacheDir: the cache the downloads fill).
// Nothing when every download answered (or l is nil).
func (l *Loaded) WriteNetworkHint(w io.Writer, cmd, cacheDir string) {
	if l == nil || l.Fetch == nil {
		return
	}
	urls := l.Fetch.Unreachable()
	if len(urls) == 0 {
		return
	}
	fmt.Fprintf(w, "swebuild %s: %d file(s) could not be downloaded (their host gave no answer; each was asked once):\n", cmd, len(urls))
	const most = 20
	for i, u := range urls {
		if i == most {
			fmt.Fprintf(w, "  ... and %d more\n", len(urls)-most)
			break
		}
		fmt.Fprintf(w, "  %s\n", u)
	}
	fmt.Fprintf(w, "These specs embed requirements.txt / environment.yml fetched at environment_setup_commit. Without a network:\n"+
		"run swebuild once where the host is reachable to fill the cache (%s), or copy such a cache there (--cache-dir);\n"+
		"--offline uses the cache only and names each missing file at once.\n", filepath.Join(cacheDir, "http"))
}
