package superblock

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseTV1(t *testing.T) {
	b := tv1(t)
	if got := Checksum(b); got != 0x6064636f {
		t.Fatalf("Checksum(TV1) = %#x, want 0x6064636f", got)
	}
	sb, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(TV1): %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"magic", sb.Magic, uint32(Magic)},
		{"major", sb.MajorVersion, uint32(1)},
		{"feature_map", sb.FeatureMap, uint32(0)},
		{"set_uuid", FormatUUID(sb.SetUUID), "6865ede1:f1a76b48:45071d66:a55755bd"},
		{"name", sb.Name(), "framework:arrayname"},
		{"ctime", sb.CTime.Seconds(), int64(1723397006)},
		{"ctime usec", sb.CTime.Micros(), uint32(0)},
		{"utime", sb.UTime.Seconds(), int64(1723397006)},
		{"level", sb.Level, int32(1)},
		{"layout", sb.Layout, uint32(0)},
		{"size", sb.Size, uint64(202752)},
		{"chunksize", sb.ChunkSize, uint32(0)},
		{"raid_disks", sb.RaidDisks, uint32(2)},
		{"data_offset", sb.DataOffset, uint64(2048)},
		{"data_size", sb.DataSize, uint64(202752)},
		{"super_offset", sb.SuperOffset, uint64(8)},
		{"minor", sb.Minor(), 2},
		{"dev_number", sb.DevNumber, uint32(0)},
		{"device_uuid", FormatUUID(sb.DeviceUUID), "a5cc7f3a:a6bc32e7:97b77289:7554b62f"},
		{"devflags", sb.DevFlags, uint8(0)},
		{"bblog_shift", sb.BBLogShift, uint8(0)},
		{"bblog_size", sb.BBLogSize, uint16(8)},
		{"bblog_offset", sb.BBLogOffset, int32(16)},
		{"events", sb.Events, uint64(17)},
		{"resync_offset", sb.ResyncOffset, MaxSector},
		{"sb_csum", sb.Checksum, uint32(0x6064636f)},
		{"max_dev", sb.MaxDev, uint32(128)},
		{"roles len", len(sb.DevRoles), 128},
		{"role 0", sb.DevRoles[0], uint16(0)},
		{"role 1", sb.DevRoles[1], uint16(1)},
		{"role 2", sb.DevRoles[2], uint16(RoleSpare)},
		{"own role", sb.Role(), uint16(0)},
		{"encoded size", sb.EncodedSize(), 512},
		{"write size", sb.WriteSize(), 512},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Both members were 100 MiB files.
	if err := sb.CheckDevice(204800); err != nil {
		t.Errorf("CheckDevice(204800): %v", err)
	}
	if got := sb.Marshal(); !bytes.Equal(got, b) {
		t.Errorf("Marshal(Parse(TV1)) differs from TV1")
	}
	// A 4 KiB read of the area (zeros after the 512 written bytes) parses the same.
	area := append(append([]byte{}, b...), make([]byte, AreaSize-len(b))...)
	if _, err := Parse(area); err != nil {
		t.Errorf("Parse(TV1 in 4 KiB): %v", err)
	}
}

func TestParseNotV1(t *testing.T) {
	if sb, err := Parse(make([]byte, HeaderSize-1)); sb != nil || err != ErrShort {
		t.Errorf("short: got %v, %v; want nil, ErrShort", sb, err)
	}
	b := tv1(t)
	b[0] ^= 1
	if sb, err := Parse(b); sb != nil || err != ErrBadMagic {
		t.Errorf("bad magic: got %v, %v; want nil, ErrBadMagic", sb, err)
	}
	// Exactly the header with max_dev 0 is a complete superblock.
	sb := mkSB(2)
	sb.MaxDev, sb.DevRoles = 0, nil
	h := sb.MarshalWithChecksum()[:HeaderSize]
	if _, err := Parse(h); err != nil {
		t.Errorf("header-only superblock with max_dev 0: %v", err)
	}
}

// TestParseRules breaks each kernel rule in turn. Every case must produce
// exactly the listed error (sentinel, offset, field) and nothing else, and
// the ok cases at each rule's boundary must parse cleanly.
func TestParseRules(t *testing.T) {
	type tc struct {
		name   string
		minor  int
		mod    func(sb *Superblock)
		raw    func(b []byte) []byte // after checksumming
		err    error                 // nil: must parse cleanly
		off    int64
		field  string
		substr string
	}
	cases := []tc{
		{name: "valid 1.0", minor: 0},
		{name: "valid 1.1", minor: 1},
		{name: "valid 1.2", minor: 2},
		{name: "major 0", minor: 2, mod: func(sb *Superblock) { sb.MajorVersion = 0 }, err: ErrVersion, off: 0x04, field: "major_version"},
		{name: "major 2", minor: 2, mod: func(sb *Superblock) { sb.MajorVersion = 2 }, err: ErrVersion, off: 0x04, field: "major_version"},
		{name: "checksum", minor: 2, raw: func(b []byte) []byte { b[0xD8]++; return b }, err: ErrChecksum, off: 0xD8, field: "sb_csum", substr: "expected"},
		{name: "role byte changes checksum", minor: 2, raw: func(b []byte) []byte { b[0x100+2*127] = 0; return b }, err: ErrChecksum, off: 0xD8, field: "sb_csum"},
		{name: "byte past max_dev not covered", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 127 }, raw: func(b []byte) []byte { b[0x100+2*127] = 0; return b }},
		{name: "max_dev 1920", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = MaxDevs }},
		{name: "max_dev 1921", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = MaxDevs + 1 }, err: ErrMaxDev, off: 0xDC, field: "max_dev"},
		{name: "max_dev huge", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 1 << 31 }, err: ErrMaxDev, off: 0xDC, field: "max_dev"},
		{name: "roles past buffer", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 1000 }, raw: func(b []byte) []byte { return b[:1024] }, err: ErrShort, off: 0xDC, field: "max_dev"},
		{name: "odd max_dev", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 127 }},
		{name: "pad0", minor: 2, mod: func(sb *Superblock) { sb.Pad0 = 1 << 31 }, err: ErrPadding, off: 0x0C, field: "pad0"},
		{name: "unknown feature 13", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = 1 << 13 }, err: ErrFeatures, off: 0x08, field: "feature_map", substr: "0x2000"},
		{name: "unknown feature 31", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBitmapOffset | 1<<31 }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "all known features but PPL", minor: 2, mod: func(sb *Superblock) {
			sb.FeatureMap = FeatureAll &^ (FeaturePPL | FeatureMultiplePPLs | FeatureRAID0Layout)
			sb.DevRoles[0] = RoleJournal
		}},
		{name: "PPL alone", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeaturePPL; sb.SetPPL(8, 2048) }},
		{name: "multiple PPLs alone", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureMultiplePPLs; sb.SetPPL(8, 2048) }},
		{name: "PPL+bitmap", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeaturePPL | FeatureBitmapOffset }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "PPL+journal", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeaturePPL | FeatureJournal }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "multiple PPLs+bitmap", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureMultiplePPLs | FeatureBitmapOffset }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "PPL+multiple PPLs", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeaturePPL | FeatureMultiplePPLs }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "raid0 layout on raid0", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureRAID0Layout; sb.Level = LevelRAID0 }},
		{name: "raid0 layout on raid1", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureRAID0Layout }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "raid0 layout on linear", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureRAID0Layout; sb.Level = LevelLinear }, err: ErrFeatures, off: 0x08, field: "feature_map"},
		{name: "data_size 10", minor: 2, mod: func(sb *Superblock) { sb.DataSize = 10 }},
		{name: "data_size 9", minor: 2, mod: func(sb *Superblock) { sb.DataSize = 9 }, err: ErrDataSize, off: 0x88, field: "data_size"},
		{name: "data_size 0 on 1.0", minor: 0, mod: func(sb *Superblock) { sb.DataSize = 0 }, err: ErrDataSize, off: 0x88, field: "data_size"},
		{name: "1.2 data right after sb", minor: 2, mod: func(sb *Superblock) { sb.DataOffset = 9 }},
		{name: "1.2 data inside sb", minor: 2, mod: func(sb *Superblock) { sb.DataOffset = 8 }, err: ErrDataOffset, off: 0x80, field: "data_offset"},
		{name: "1.2 data before sb", minor: 2, mod: func(sb *Superblock) { sb.DataOffset = 0 }, err: ErrDataOffset, off: 0x80, field: "data_offset"},
		{name: "1.2 sb of 2 sectors", minor: 2, mod: func(sb *Superblock) { sb.MaxDev = 129; sb.DataOffset = 9 }, err: ErrDataOffset, off: 0x80, field: "data_offset"},
		{name: "1.1 data at 1", minor: 1, mod: func(sb *Superblock) { sb.DataOffset = 1 }},
		{name: "1.1 data at 0", minor: 1, mod: func(sb *Superblock) { sb.DataOffset = 0 }, err: ErrDataOffset, off: 0x80, field: "data_offset"},
		{name: "1.0 data at 0", minor: 0, mod: func(sb *Superblock) { sb.DataOffset = 0 }},
		{name: "new offset ok", minor: 2, mod: func(sb *Superblock) {
			sb.FeatureMap = FeatureReshapeActive | FeatureNewOffset
			sb.NewOffset = -2039
		}},
		{name: "new offset inside sb", minor: 2, mod: func(sb *Superblock) {
			sb.FeatureMap = FeatureReshapeActive | FeatureNewOffset
			sb.NewOffset = -2040
		}, err: ErrDataOffset, off: 0x7C, field: "new_offset"},
		{name: "new offset ignored without feature", minor: 2, mod: func(sb *Superblock) {
			sb.FeatureMap = FeatureReshapeActive
			sb.NewOffset = -2048
		}},
		{name: "bad blocks, log of 8", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBadBlocks }},
		{name: "bad blocks, log of 9", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBadBlocks; sb.BBLogSize = 9 }, err: ErrBadBlockLog, off: 0xBA, field: "bblog_size"},
		{name: "no bad blocks, log of 9", minor: 2, mod: func(sb *Superblock) { sb.BBLogSize = 9 }},
		{name: "bad blocks, offset 0", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureBadBlocks; sb.BBLogOffset = 0 }, err: ErrBadBlockLog, off: 0xBC, field: "bblog_offset"},
		{name: "journal role with feature", minor: 2, mod: func(sb *Superblock) { sb.FeatureMap = FeatureJournal; sb.DevRoles[0] = RoleJournal }},
		{name: "journal role without feature", minor: 2, mod: func(sb *Superblock) { sb.DevRoles[0] = RoleJournal }, err: ErrJournalRole, off: 0x100, field: "dev_roles"},
		{name: "journal role of dev 5", minor: 2, mod: func(sb *Superblock) { sb.DevNumber = 5; sb.DevRoles[5] = RoleJournal }, err: ErrJournalRole, off: 0x10A, field: "dev_roles"},
		{name: "other device's journal role", minor: 2, mod: func(sb *Superblock) { sb.DevRoles[1] = RoleJournal }},
		{name: "journal role on multipath", minor: 2, mod: func(sb *Superblock) { sb.Level = LevelMultipath; sb.DevRoles[0] = RoleJournal }},
	}
	for i := 0; i < 32; i++ {
		i := i
		cases = append(cases, tc{name: fmt.Sprint("pad3 byte ", i), minor: 2, mod: func(sb *Superblock) { sb.Pad3[i] = 0x80 },
			err: ErrPadding, off: 0xE0 + int64(i), field: "pad3"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := mkSB(c.minor)
			if c.mod != nil {
				c.mod(sb)
			}
			b := sb.MarshalWithChecksum()
			if c.raw != nil {
				b = c.raw(b)
			}
			got, err := Parse(b)
			if got == nil {
				t.Fatalf("Parse returned no superblock (err %v)", err)
			}
			fes := formatErrors(t, err)
			if c.err == nil {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if len(fes) != 1 {
				t.Fatalf("want exactly one error (%v), got %d: %v", c.err, len(fes), err)
			}
			fe := fes[0]
			if !errors.Is(err, c.err) || !errors.Is(fe, c.err) {
				t.Errorf("error %v is not %v", err, c.err)
			}
			if fe.Offset != c.off || fe.Field != c.field {
				t.Errorf("error at %#x %s, want %#x %s (%v)", fe.Offset, fe.Field, c.off, c.field, fe)
			}
			if c.substr != "" && !strings.Contains(fe.Msg, c.substr) {
				t.Errorf("message %q lacks %q", fe.Msg, c.substr)
			}
			if c.err != ErrChecksum && errors.Is(err, ErrChecksum) {
				t.Errorf("unexpected checksum error")
			}
		})
	}
}

func TestParseChecksumMessage(t *testing.T) {
	b := tv1(t)
	b[0xD8] = 0x70 // stored 6064637 0
	_, err := Parse(b)
	fes := formatErrors(t, err)
	if len(fes) != 1 || fes[0].Msg != "60646370 - expected 6064636f" {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ErrChecksum) || errors.Is(err, ErrPadding) {
		t.Errorf("errors.Is mismatch for %v", err)
	}
}

// TestParseSeveral checks that independent problems are all reported, in a
// stable order, with the decoded superblock still returned.
func TestParseSeveral(t *testing.T) {
	sb := mkSB(2)
	sb.Pad0 = 7
	sb.FeatureMap = 1 << 20
	sb.DataSize = 3
	b := sb.Marshal() // stale checksum too
	got, err := Parse(b)
	if got == nil || got.Pad0 != 7 || got.DataSize != 3 {
		t.Fatalf("partial result missing: %+v", got)
	}
	var fields []string
	for _, fe := range formatErrors(t, err) {
		fields = append(fields, fe.Field)
	}
	want := "feature_map sb_csum data_size pad0"
	if g := strings.Join(fields, " "); g != want {
		t.Errorf("fields %q, want %q", g, want)
	}
	for _, s := range []error{ErrFeatures, ErrChecksum, ErrDataSize, ErrPadding} {
		if !errors.Is(err, s) {
			t.Errorf("missing %v", s)
		}
	}
}

// TestRoundTrip: Marshal(Parse(b)) == b for valid superblocks.
func TestRoundTrip(t *testing.T) {
	for minor := 0; minor <= 2; minor++ {
		for _, maxDev := range []uint32{0, 1, 127, 128, 129, 384, MaxDevs} {
			sb := mkSB(minor)
			sb.MaxDev = maxDev
			if int(maxDev) < len(sb.DevRoles) {
				sb.DevRoles = sb.DevRoles[:maxDev]
			}
			sb.FeatureMap = FeatureBitmapOffset
			sb.BitmapOffset = 8
			if minor == 0 {
				sb.BitmapOffset = -16
			}
			if maxDev > 128 && minor != 0 {
				sb.DataOffset = 4096
				sb.DataSize = testDevSectors - 4096
			}
			b := sb.MarshalWithChecksum()
			if len(b) != sb.WriteSize() || len(b)%512 != 0 {
				t.Fatalf("Marshal length %d, WriteSize %d", len(b), sb.WriteSize())
			}
			got, err := Parse(b)
			if err != nil {
				t.Fatalf("1.%d max_dev %d: %v", minor, maxDev, err)
			}
			if err := got.CheckDevice(testDevSectors); err != nil {
				t.Errorf("1.%d max_dev %d CheckDevice: %v", minor, maxDev, err)
			}
			if !bytes.Equal(got.Marshal(), b) {
				t.Errorf("1.%d max_dev %d: round trip differs", minor, maxDev)
			}
		}
	}
}

func TestMarshalCapped(t *testing.T) {
	sb := mkSB(2)
	sb.MaxDev = 1 << 31
	if n := len(sb.Marshal()); n != AreaSize {
		t.Errorf("Marshal of max_dev 2^31 is %d bytes, want %d", n, AreaSize)
	}
}

func TestNewDataOffset(t *testing.T) {
	sb := mkSB(2)
	sb.NewOffset = -8
	if got := sb.NewDataOffset(); got != 2048 {
		t.Errorf("without features: %d", got)
	}
	sb.FeatureMap = FeatureReshapeActive | FeatureNewOffset
	if got := sb.NewDataOffset(); got != 2040 {
		t.Errorf("with features: %d", got)
	}
}
