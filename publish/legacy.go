package publish

import (
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
func migrateLegacy(path string) (bool, []*core.LineError, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	if err := core.Lock(f); err != nil {
		return false, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return false, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !core.IsLegacyLedger(data) {
		return false, nil, nil
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
