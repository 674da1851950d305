package imagediff

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
)

// A git index (.git/index) holds, for every tracked file, the stat data of
// its checkout: ctime and mtime to the nanosecond, device and inode
// numbers, all from the build's clock and file system. Two checkouts of
// the same commit differ there and nowhere else; zeroIndexStat lets the
// comparer check that instead of assuming it from the path.

// zeroIndexStat returns a git index (versions 2 to 4, SHA-1) with the
// ctime, mtime, device and inode of every entry zeroed and its checksum
// recomputed; changed is false when they were zero already.
func zeroIndexStat(data []byte) (out []byte, changed bool, err error) {
	const hashLen = sha1.Size
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return nil, false, errors.New("not a git index (no DIRC header)")
	}
	body := data[:len(data)-hashLen]
	if sum := sha1.Sum(body); !bytes.Equal(sum[:], data[len(data)-hashLen:]) {
		return nil, false, errors.New("git index checksum does not match (not SHA-1, or damaged)")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, false, fmt.Errorf("git index version %d not supported", version)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	out = bytes.Clone(data)
	off := 12
	for i := range count {
		const fixed = 40 + hashLen + 2 // stat data, object name, flags
		if off+fixed > len(body) {
			return nil, false, fmt.Errorf("git index entry %d: truncated", i)
		}
		start := off
		flags := binary.BigEndian.Uint16(data[off+40+hashLen:])
		off += fixed
		if flags&0x4000 != 0 { // extended flags (version 3 and later)
			if version < 3 {
				return nil, false, fmt.Errorf("git index entry %d: extended flags in a version %d index", i, version)
			}
			off += 2
		}
		if version == 4 {
			// A varint (prefix length to drop) then the NUL-terminated
			// rest of the path; no padding.
			for off < len(body) && data[off]&0x80 != 0 {
				off++
			}
			off++
		}
		nul := bytes.IndexByte(body[off:], 0)
		if nul < 0 {
			return nil, false, fmt.Errorf("git index entry %d: path not terminated", i)
		}
		off += nul + 1
		if version < 4 {
			// Padded with NULs to a multiple of 8 bytes from the entry's
			// start (the path's NUL included).
			off = start + (off-start+7)&^7
		}
		if off > len(body) {
			return nil, false, fmt.Errorf("git index entry %d: truncated", i)
		}
		stat := out[start : start+24] // ctime s/ns, mtime s/ns, dev, ino
		if !bytes.Equal(stat, make([]byte, 24)) {
			clear(stat)
			changed = true
		}
	}
	if !changed {
		return data, false, nil
	}
	sum := sha1.Sum(out[:len(out)-hashLen])
	copy(out[len(out)-hashLen:], sum[:])
	return out, true, nil
}
