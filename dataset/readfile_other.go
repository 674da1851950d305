//go:build !linux

package dataset

import (
	"context"

	"github.com/swebuild/swebuild/core"
)

// readFile is os.ReadFile refusing more than max bytes (see the Linux one).
func readFile(ctx context.Context, path string, max int64) ([]byte, error) {
	// Opening a FIFO no process writes to blocks, and so does reading one
	// that sends nothing: both give up when ctx is done (a SIGTERM).
	f, err := core.OpenContext(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr // f was closed when ctx was done
		}
		return nil, err
	}
	if fi.Mode().IsRegular() && fi.Size() > max {
		return nil, tooLarge(fi.Size(), max)
	}
	return readAtMost(ctx, f, max, true)
}
