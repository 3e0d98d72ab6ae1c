package superblock

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUUID is returned by ParseUUID for text that is not a UUID.
var ErrUUID = errors.New("superblock: invalid UUID")

const hexDigits = "0123456789abcdef"

// FormatUUID renders a v1.x set_uuid or device_uuid the way mdadm prints
// it ("Array UUID", --detail "UUID", ARRAY lines): the 16 bytes in stored
// order as lower-case hex, in four groups of 8 digits joined by ':', e.g.
// "6865ede1:f1a76b48:45071d66:a55755bd".
func FormatUUID(u [16]byte) string { return FormatUUIDSep(u, ':') }

// FormatUUIDSep is FormatUUID with another group separator (mdadm uses
// e.g. '-' in some names); a zero sep joins the groups directly.
func FormatUUIDSep(u [16]byte, sep byte) string {
	var b strings.Builder
	b.Grow(35)
	for i, c := range u {
		if i > 0 && i%4 == 0 && sep != 0 {
			b.WriteByte(sep)
		}
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// ParseUUID accepts a UUID as mdadm's parse_uuid does: exactly 32 hex
// digits (either case), with any number of ':', '.', ' ' and '-'
// separators anywhere. The digits give the bytes in order, so
// "0123456789abcdef:fedcba9876543210" yields the set_uuid bytes
// 01 23 45 67 89 ab ..., printed back by FormatUUID as
// "01234567:89abcdef:fedcba98:76543210" (mdadm test 04update-uuid).
// Anything else wraps ErrUUID.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		case c == ':' || c == '.' || c == ' ' || c == '-':
			continue
		default:
			return [16]byte{}, fmt.Errorf("%w %q: unexpected character %q", ErrUUID, s, c)
		}
		if n < 32 {
			u[n/2] |= v << (4 * (1 - n%2))
		}
		n++
	}
	if n != 32 {
		return [16]byte{}, fmt.Errorf("%w %q: %d hex digits, want 32", ErrUUID, s, n)
	}
	return u, nil
}
