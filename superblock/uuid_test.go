package superblock

import (
	"errors"
	"testing"
)

func TestParseUUID(t *testing.T) {
	want := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	ok := []string{
		"0123456789abcdef:fedcba9876543210", // mdadm tests/04update-uuid
		"01234567:89abcdef:fedcba98:76543210",
		"0123456789ABCDEFFEDCBA9876543210",
		"01234567-89ab-cdef-fedc-ba9876543210",
		"0123.4567 89ab:cdef-fedc ba98.7654:3210",
		"::0123456789abcdef fedcba9876543210--",
	}
	for _, s := range ok {
		got, err := ParseUUID(s)
		if err != nil || got != want {
			t.Errorf("ParseUUID(%q) = %x, %v; want %x", s, got, err, want)
		}
	}
	bad := []string{
		"",
		"0123456789abcdef:fedcba987654321",   // 31 digits
		"0123456789abcdef:fedcba98765432100", // 33 digits
		"0123456789abcdeg:fedcba9876543210",
		"0123456789abcdef_fedcba9876543210",
		"0x0123456789abcdef:fedcba98765432",
		"0123456789abcdef,fedcba9876543210",
	}
	for _, s := range bad {
		if got, err := ParseUUID(s); err == nil || !errors.Is(err, ErrUUID) || got != ([16]byte{}) {
			t.Errorf("ParseUUID(%q) = %x, %v; want zero, ErrUUID", s, got, err)
		}
	}
}

func TestFormatUUID(t *testing.T) {
	u, err := ParseUUID("0123456789abcdef:fedcba9876543210")
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatUUID(u); got != "01234567:89abcdef:fedcba98:76543210" {
		t.Errorf("FormatUUID = %q", got)
	}
	if got := FormatUUIDSep(u, '-'); got != "01234567-89abcdef-fedcba98-76543210" {
		t.Errorf("FormatUUIDSep '-' = %q", got)
	}
	if got := FormatUUIDSep(u, 0); got != "0123456789abcdeffedcba9876543210" {
		t.Errorf("FormatUUIDSep 0 = %q", got)
	}
	// TV1's set_uuid bytes and the UUID mdadm --detail --scan printed.
	tv := tv1(t)
	var set [16]byte
	copy(set[:], tv[0x10:0x20])
	if got := FormatUUID(set); got != "6865ede1:f1a76b48:45071d66:a55755bd" {
		t.Errorf("TV1 uuid = %q", got)
	}
	// blkid's RFC 4122 text of the same bytes parses back to them.
	if back, err := ParseUUID("6865ede1-f1a7-6b48-4507-1d66a55755bd"); err != nil || back != set {
		t.Errorf("ParseUUID(blkid form) = %x, %v", back, err)
	}
	for i := 0; i < 256; i++ {
		var u [16]byte
		for j := range u {
			u[j] = byte(i*31 + j*17)
		}
		if back, err := ParseUUID(FormatUUID(u)); err != nil || back != u {
			t.Fatalf("round trip %x -> %q -> %x, %v", u, FormatUUID(u), back, err)
		}
	}
}
