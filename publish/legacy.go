package publish

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/swebuild/swebuild/core"
)

// migrateLegacy converts the ledger at path in place when it is in the
// older format, keeping the original as path.legacy. It holds the ledger's
// lock while it does, so a concurrent publish is refused as usual. It
// reports whether it converted, and the lines it could not.
//
// The file is checked before any of it is read (core.CheckLogFile: a
// regular file of at most core.MaxFileBytes), only its first line (at most
// core.MaxLine bytes) is read to tell the format, and reading stops when
// ctx is done.
func migrateLegacy(ctx context.Context, path string) (bool, []*core.LineError, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	if err := core.CheckLogFile(f); err != nil {
		return false, nil, err
	}
	if err := core.Lock(f); err != nil {
		return false, nil, err
	}
	first, err := bufio.NewReader(io.LimitReader(f, core.MaxLine+1)).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return false, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !core.IsLegacyLedger(first) {
		return false, nil, nil
	}
	data, err := core.ReadAllContext(ctx, path, core.MaxFileBytes)
	if err != nil {
		return false, nil, err
	}
	recs, cerr := core.ConvertLegacyLedger(data, path)
	bad, err := core.LineErrors(cerr)
	if err != nil {
		return false, nil, err
	}
	if err := os.WriteFile(path+".legacy", data, 0o644); err != nil {
		return false, nil, fmt.Errorf("keeping the older ledger: %w", err)
	}
	if err := core.WriteFile(path, recs); err != nil {
		return false, nil, err
	}
	return true, bad, nil
}
