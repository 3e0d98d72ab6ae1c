package superblock

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// tv1Hex is TV1 of md-format.md §9: member 0 of a 2x100 MiB raid1 made by
// mdadm ("framework:arrayname"), bytes 0x1000-0x11ff of the device.
const tv1Hex = `
fc 4e 2b a9 01 00 00 00  00 00 00 00 00 00 00 00
68 65 ed e1 f1 a7 6b 48  45 07 1d 66 a5 57 55 bd
66 72 61 6d 65 77 6f 72  6b 3a 61 72 72 61 79 6e
61 6d 65 00 00 00 00 00  00 00 00 00 00 00 00 00
8e f3 b8 66 00 00 00 00  01 00 00 00 00 00 00 00
00 18 03 00 00 00 00 00  00 00 00 00 02 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 08 00 00 00 00 00 00  00 18 03 00 00 00 00 00
08 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  a5 cc 7f 3a a6 bc 32 e7
97 b7 72 89 75 54 b6 2f  00 00 08 00 10 00 00 00
8e f3 b8 66 00 00 00 00  11 00 00 00 00 00 00 00
ff ff ff ff ff ff ff ff  6f 63 64 60 80 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 01 00 ff ff ff ff  ff ff ff ff ff ff ff ff
`

// tv1 returns the 512 bytes of TV1 (rows 0x1110-0x11ff are all ff).
func tv1(t testing.TB) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(tv1Hex), ""))
	if err != nil {
		t.Fatal(err)
	}
	for len(b) < 512 {
		b = append(b, 0xff)
	}
	return b
}

// testDevSectors is the size of the synthetic members: 64 MiB.
const testDevSectors = 64 << 20 >> 9

// mkSB returns a superblock laid out as mdadm 4.2 creates a member of a
// two-device raid1 with metadata 1.minor on a testDevSectors device
// (write_init_super1 / validate_geometry1; 1.0 keeps 8 sectors of bitmap
// space plus an 8-sector bad-block log before the superblock).
func mkSB(minor int) *Superblock {
	sb := &Superblock{
		Magic:        Magic,
		MajorVersion: 1,
		SetUUID:      [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
		CTime:        MakeTime(1723397006, 0),
		Level:        LevelRAID1,
		RaidDisks:    2,
		DevNumber:    0,
		DeviceUUID:   [16]byte{0xa5, 0xcc, 0x7f, 0x3a, 0xa6, 0xbc, 0x32, 0xe7, 0x97, 0xb7, 0x72, 0x89, 0x75, 0x54, 0xb6, 0x2f},
		BBLogSize:    8,
		UTime:        MakeTime(1723397010, 0),
		Events:       17,
		ResyncOffset: MaxSector,
		MaxDev:       128,
	}
	sb.SetNameString("framework:arrayname")
	sb.DevRoles = make([]uint16, 128)
	for i := range sb.DevRoles {
		sb.DevRoles[i] = RoleSpare
	}
	sb.DevRoles[0], sb.DevRoles[1] = 0, 1
	switch minor {
	case 0:
		sb.SuperOffset = (testDevSectors - 16) &^ 7
		sb.DataOffset = 0
		sb.DataSize = sb.SuperOffset - 16
		sb.BBLogOffset = -8
	case 1, 2:
		sb.SuperOffset = map[int]uint64{1: 0, 2: 8}[minor]
		sb.DataOffset = 2048
		sb.DataSize = testDevSectors - 2048
		sb.BBLogOffset = 16
	}
	sb.Size = sb.DataSize &^ 127 // raid1: 64 KiB multiple
	return sb
}

// formatErrors flattens err (a FormatError or a join of them).
func formatErrors(t testing.TB, err error) []*FormatError {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []*FormatError
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var fe *FormatError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q (%T) is not a *FormatError", e, e)
		}
		out = append(out, fe)
	}
	walk(err)
	return out
}
