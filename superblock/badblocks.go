package superblock

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
)

// BadBlock is one entry of the bad-block log, in 512-byte sectors counted
// from the start of the member device (the kernel adds data_offset before
// recording, see rdev_set_badblocks), already multiplied by 2^bblog_shift.
type BadBlock struct {
	Start uint64 // first bad sector
	Len   uint64 // number of bad sectors
}

// BadBlockMaxLen is the longest run, in blocks of 2^bblog_shift sectors,
// that the kernel stores in one log entry (BB_MAX_LEN). The on-disk field
// has 10 bits, so a reader accepts up to 1023.
const BadBlockMaxLen = 512

// badBlockEnd is the all-ones entry that ends the log.
const badBlockEnd = ^uint64(0)

// ParseBadBlocks decodes the bad-block log, b being its bblog_size*512
// bytes as read from super_offset+bblog_offset, and shift the superblock's
// bblog_shift. Each le64 entry holds the length in blocks in bits 0-9 and
// the start block in bits 10-63; both are shifted left by shift to give
// sectors. An all-ones entry ends the list; so does the end of b.
//
// Entries are returned as stored, zero-length ones included. Damage is
// reported as *FormatError values (Offset relative to b, wrapping
// ErrBadBlockLog) joined into the error, next to all the entries that could
// be decoded: a length not a multiple of 8, or an entry whose sector
// numbers do not fit in 64 bits after the shift.
func ParseBadBlocks(b []byte, shift uint8) ([]BadBlock, error) {
	var out []BadBlock
	var errs []error
	i := 0
	for ; i+8 <= len(b); i += 8 {
		e := le.Uint64(b[i:])
		if e == badBlockEnd {
			return out, errors.Join(errs...)
		}
		start, n := e>>10, e&0x3ff
		if shift >= 64 || (start != 0 && bits.LeadingZeros64(start) < int(shift)) || (n != 0 && bits.LeadingZeros64(n) < int(shift)) {
			errs = append(errs, &FormatError{Offset: int64(i), Field: fmt.Sprintf("bblog[%d]", i/8),
				Msg: fmt.Sprintf("start block %d, %d blocks: shifted by %d does not fit in 64 bits", start, n, shift), Err: ErrBadBlockLog})
			continue
		}
		out = append(out, BadBlock{Start: start << shift, Len: n << shift})
	}
	if i != len(b) {
		errs = append(errs, &FormatError{Offset: int64(i), Field: "bblog", Msg: fmt.Sprintf("%d trailing bytes, entries are 8 bytes", len(b)-i), Err: ErrBadBlockLog})
	}
	return out, errors.Join(errs...)
}

// MarshalBadBlocks encodes a bad-block list into a log of size bytes (a
// positive multiple of 8, normally bblog_size*512) the way the kernel
// stores it: ranges are widened to whole blocks of 2^shift sectors, sorted,
// merged when they overlap or touch, split into entries of at most
// BadBlockMaxLen blocks, and the rest of the log is filled with 0xff.
// It fails (wrapping ErrBadBlockLog) when the entries do not fit, when a
// start block needs more than 54 bits, or when size or shift are invalid.
func MarshalBadBlocks(list []BadBlock, shift uint8, size int) ([]byte, error) {
	if size <= 0 || size%8 != 0 {
		return nil, fmt.Errorf("%w: log size %d is not a positive multiple of 8", ErrBadBlockLog, size)
	}
	if shift > 53 {
		return nil, fmt.Errorf("%w: shift %d too large", ErrBadBlockLog, shift)
	}
	unit := uint64(1) << shift
	type run struct{ s, e uint64 } // blocks, [s, e)
	runs := make([]run, 0, len(list))
	for _, bb := range list {
		if bb.Len == 0 {
			continue
		}
		end := bb.Start + bb.Len
		if end < bb.Start {
			return nil, fmt.Errorf("%w: range at sector %d of %d sectors wraps around", ErrBadBlockLog, bb.Start, bb.Len)
		}
		s := bb.Start >> shift
		e := end >> shift
		if end&(unit-1) != 0 {
			e++
		}
		runs = append(runs, run{s, e})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].s < runs[j].s })
	merged := runs[:0]
	for _, r := range runs {
		if k := len(merged) - 1; k >= 0 && r.s <= merged[k].e {
			if r.e > merged[k].e {
				merged[k].e = r.e
			}
			continue
		}
		merged = append(merged, r)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = 0xff
	}
	n := 0
	for _, r := range merged {
		for s := r.s; s < r.e; {
			l := r.e - s
			if l > BadBlockMaxLen {
				l = BadBlockMaxLen
			}
			if s >= 1<<54 {
				return nil, fmt.Errorf("%w: start block %d needs more than 54 bits", ErrBadBlockLog, s)
			}
			if (n+1)*8 > size {
				return nil, fmt.Errorf("%w: more than %d entries do not fit in %d bytes", ErrBadBlockLog, size/8, size)
			}
			le.PutUint64(b[n*8:], s<<10|l)
			n++
			s += l
		}
	}
	return b, nil
}
