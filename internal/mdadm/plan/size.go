package plan

import (
	"errors"
	"math"
	"math/bits"
)

// ErrInvalidSize is returned by ParseSectors and ParseSize for text mdadm's
// parse_size rejects.
var ErrInvalidSize = errors.New("invalid size")

// ParseSectors mirrors mdadm's parse_size: a positive decimal number with an
// optional suffix K (KiB, also the default), M, G, T (binary multiples) or s
// (512-byte sectors). It returns 512-byte sectors. Suffixes are
// case-sensitive; anything after the suffix, a zero or negative number, or
// no number at all is an error. Leading white space and a '+' sign are
// accepted, as strtoll does.
func ParseSectors(s string) (uint64, error) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var n uint64
	overflow := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			overflow = true
		} else {
			n = n*10 + d
		}
		i++
	}
	if i == start || neg || n == 0 || overflow {
		return 0, ErrInvalidSize
	}
	mult := uint64(2) // KiB
	if i < len(s) {
		switch s[i] {
		case 'K':
			i++
		case 'M':
			mult = 1024 * 2
			i++
		case 'G':
			mult = 1024 * 1024 * 2
			i++
		case 'T':
			mult = 1024 * 1024 * 1024 * 2
			i++
		case 's':
			mult = 1
			i++
		}
	}
	if i != len(s) {
		return 0, ErrInvalidSize
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, ErrInvalidSize
	}
	return lo, nil
}

// ParseSize is ParseSectors converted to KiB the way mdadm converts --size:
// less than 8 sectors (4 KiB) is invalid ("invalid size: ..."), an odd
// sector count is rounded down.
func ParseSize(s string) (uint64, error) {
	sec, err := ParseSectors(s)
	if err != nil || sec < 8 {
		return 0, refuseArg(InvalidSize, s)
	}
	return sec / 2, nil
}

// ParseChunk parses a --chunk argument to KiB as mdadm does: at least 8
// sectors and a whole number of KiB, else "invalid chunk/rounding value".
func ParseChunk(s string) (uint64, error) {
	sec, err := ParseSectors(s)
	if err != nil || sec < 8 || sec&1 != 0 {
		return 0, refuseArg(InvalidChunk, s)
	}
	return sec / 2, nil
}

// ParseBitmapChunk parses --bitmap-chunk to bytes as mdadm does: a power of
// two number of sectors, else "invalid bitmap chunksize".
func ParseBitmapChunk(s string) (uint64, error) {
	sec, err := ParseSectors(s)
	if err != nil || sec&(sec-1) != 0 {
		return 0, refuseArg(InvalidBitmapChunk, s)
	}
	return sec * 512, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
