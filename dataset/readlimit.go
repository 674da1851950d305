package dataset

import (
	"fmt"
	"io"
)

// readAtMost reads r to the end, failing with an error wrapping ErrTooLarge
// as soon as more than max bytes have come.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("more than %d bytes: %w of %s a file", max, ErrTooLarge, sizeString(max))
	}
	return b, nil
}

func tooLarge(size, max int64) error {
	return fmt.Errorf("%d bytes: %w of %s a file", size, ErrTooLarge, sizeString(max))
}
