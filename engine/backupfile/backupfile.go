// Package backupfile is mdadm 4.2's reshape backup format (Grow.c struct
// mdp_backup_super, "md_backup_data-1" and "-2"): the 512-byte header
// that describes the copy of a reshape's critical section kept in a
// --backup-file (or at the end of a spare). Bytes in, bytes out: it
// imports nothing of the project.
//
// Layout (little-endian, offsets in bytes): magic[16] 0, set_uuid[16] 16,
// mtime 32, devstart 40, arraystart 48, length 56 (sectors), sb_csum 64,
// pad1 68, devstart2 72, arraystart2 80, length2 88, sb_csum2 96, pad to
// 512. A backup file holds the header at byte 0 and the data from
// devstart (8 sectors, i.e. byte 4096) on; the second section of a "-2"
// header lies devstart2 sectors after devstart.
package backupfile

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Size is the header's size in bytes.
const Size = 512

// DataStart is where mdadm's backup file keeps the data: devstart 8
// sectors, the header 4096 bytes before it (reshape_open_backup_file).
const DataStart = 8 * 512

// Magic1 and Magic2 are the two header versions.
const (
	Magic1 = "md_backup_data-1"
	Magic2 = "md_backup_data-2"
)

// Field offsets (mdp_backup_super).
const (
	OffMagic       = 0
	OffSetUUID     = 16
	OffMtime       = 32
	OffDevStart    = 40
	OffArrayStart  = 48
	OffLength      = 56
	OffCsum        = 64
	OffPad1        = 68
	OffDevStart2   = 72
	OffArrayStart2 = 80
	OffLength2     = 88
	OffCsum2       = 96
	OffPad         = 100
	OffTag         = 256 // in the pad: Header.Tag
)

// Header is a decoded mdp_backup_super. Sectors are 512 bytes.
type Header struct {
	Version     int // 1 or 2 (the magic's last character)
	SetUUID     [16]byte
	Mtime       uint64
	DevStart    uint64 // sector of the data in the file or device
	ArrayStart  uint64 // array sector of the first section
	Length      uint64 // its length in sectors (0: no backup held)
	DevStart2   uint64 // version 2: sectors after DevStart of the second section
	ArrayStart2 uint64
	Length2     uint64
	// Tag is 16 bytes of the pad naming the header's writer (zero in
	// every header mdadm writes: its child clears the struct first)
	Tag [16]byte
}

// Errors Decode returns (wrapped in a *FormatError).
var (
	ErrShort    = errors.New("short backup header")
	ErrMagic    = errors.New("no backup metadata")
	ErrChecksum = errors.New("bad backup-metadata checksum")
)

// FormatError says which field of a header is wrong.
type FormatError struct {
	Offset int
	Field  string
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("backup header: %s at byte %d: %v", e.Field, e.Offset, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Checksum is mdadm 4.2's bsb_csum over the first n bytes of b, bug for
// bug: every step adds b[0] (a signed char), not b[i], to the sum shifted
// left by 3 in a 32-bit int.
func Checksum(b []byte, n int) uint32 {
	var c int32
	if len(b) == 0 {
		return 0
	}
	for i := 0; i < n; i++ {
		c = c<<3 + int32(int8(b[0]))
	}
	return uint32(c)
}

// Encode writes h as a 512-byte header with its checksum(s).
func Encode(h *Header) []byte {
	b := make([]byte, Size)
	magic := Magic1
	if h.Version == 2 {
		magic = Magic2
	}
	copy(b[OffMagic:], magic)
	copy(b[OffSetUUID:], h.SetUUID[:])
	le := binary.LittleEndian
	le.PutUint64(b[OffMtime:], h.Mtime)
	le.PutUint64(b[OffDevStart:], h.DevStart)
	le.PutUint64(b[OffArrayStart:], h.ArrayStart)
	le.PutUint64(b[OffLength:], h.Length)
	le.PutUint32(b[OffCsum:], Checksum(b, OffCsum))
	if h.Version == 2 {
		le.PutUint64(b[OffDevStart2:], h.DevStart2)
		le.PutUint64(b[OffArrayStart2:], h.ArrayStart2)
		le.PutUint64(b[OffLength2:], h.Length2)
		le.PutUint32(b[OffCsum2:], Checksum(b, OffCsum2))
	}
	copy(b[OffTag:], h.Tag[:])
	return b
}

// Decode reads a header as Grow_restart checks it: the magic, the
// checksum and, for version 2, the second checksum.
func Decode(b []byte) (*Header, error) {
	if len(b) < Size {
		return nil, &FormatError{Offset: len(b), Field: "header", Err: ErrShort}
	}
	var h Header
	switch string(b[OffMagic : OffMagic+16]) {
	case Magic1:
		h.Version = 1
	case Magic2:
		h.Version = 2
	default:
		return nil, &FormatError{Offset: OffMagic, Field: "magic", Err: ErrMagic}
	}
	le := binary.LittleEndian
	if le.Uint32(b[OffCsum:]) != Checksum(b, OffCsum) {
		return nil, &FormatError{Offset: OffCsum, Field: "sb_csum", Err: ErrChecksum}
	}
	if h.Version == 2 && le.Uint32(b[OffCsum2:]) != Checksum(b, OffCsum2) {
		return nil, &FormatError{Offset: OffCsum2, Field: "sb_csum2", Err: ErrChecksum}
	}
	copy(h.SetUUID[:], b[OffSetUUID:])
	h.Mtime = le.Uint64(b[OffMtime:])
	h.DevStart = le.Uint64(b[OffDevStart:])
	h.ArrayStart = le.Uint64(b[OffArrayStart:])
	h.Length = le.Uint64(b[OffLength:])
	if h.Version == 2 {
		h.DevStart2 = le.Uint64(b[OffDevStart2:])
		h.ArrayStart2 = le.Uint64(b[OffArrayStart2:])
		h.Length2 = le.Uint64(b[OffLength2:])
	}
	copy(h.Tag[:], b[OffTag:])
	return &h, nil
}

// Sections are the array ranges a header holds: [start, start+length)
// pairs with the data's sector in the file, empty ones left out.
type Section struct {
	DevStart, ArrayStart, Length uint64
}

// Sections lists the backed-up ranges of h (restore_stripes' calls).
func (h *Header) Sections() []Section {
	var s []Section
	if h.Length != 0 {
		s = append(s, Section{h.DevStart, h.ArrayStart, h.Length})
	}
	if h.Version == 2 && h.Length2 != 0 {
		s = append(s, Section{h.DevStart + h.DevStart2, h.ArrayStart2, h.Length2})
	}
	return s
}

// Needed is Grow_restart's test whether the backup holds data a restart
// from reshape_position pos needs: growing (or keeping the count), a
// section ending at or after pos; shrinking (forwards false), one
// starting before pos.
func (h *Header) Needed(pos uint64, forwards bool) bool {
	if h.Length == 0 && (h.Version == 1 || h.Length2 == 0) {
		return false
	}
	need := func(start, length uint64) bool {
		if forwards {
			return start+length >= pos
		}
		return start < pos
	}
	if h.Version == 1 {
		return need(h.ArrayStart, h.Length)
	}
	return need(h.ArrayStart, h.Length) || need(h.ArrayStart2, h.Length2)
}

// Restart is the reshape_position Grow_restart records after restoring
// the backup of h for a restart from pos: unchanged when the backed-up
// range does not contain pos, else the end of the backup (forwards) or
// its start (backwards).
func (h *Header) Restart(pos uint64, forwards bool) uint64 {
	var lo, hi uint64
	if h.Length != 0 {
		lo, hi = h.ArrayStart, h.ArrayStart+h.Length
	}
	if h.Version == 2 && h.Length2 != 0 {
		lo1, hi1 := h.ArrayStart2, h.ArrayStart2+h.Length2
		switch {
		case lo == hi:
			lo, hi = lo1, hi1
		case lo < lo1:
			hi = hi1
		default:
			lo = lo1
		}
	}
	if lo < hi && (pos < lo || pos > hi) {
		return pos
	}
	if forwards {
		p := h.ArrayStart + h.Length
		if h.Version == 2 {
			p = max(p, h.ArrayStart2+h.Length2)
		}
		return p
	}
	p := h.ArrayStart
	if h.Version == 2 {
		p = min(p, h.ArrayStart2)
	}
	return p
}

// MtimeOK is Grow_restart's timestamp test: the array's utime no more
// than 2 hours after the backup's mtime and no more than 10 minutes
// before it (32-bit seconds as mdadm compares them).
func MtimeOK(utime uint64, mtime uint64) bool {
	u, m := uint32(utime), uint32(mtime)
	after := int32(m+2*60*60-u) < 0  // time_after(utime, mtime+2h)
	before := int32(u-(m-10*60)) < 0 // time_before(utime, mtime-10m)
	return !after && !before
}
