//go:build !linux

package dataset

// adviseHuge does nothing here: transparent huge pages are Linux's (see the
// Linux one).
func adviseHuge([]byte) {}
