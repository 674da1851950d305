//go:build !unix

package render

import (
	"fmt"
	"os"
)

func writeFile(path, data string) error {
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
