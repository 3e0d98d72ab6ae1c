package superblock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// mk090 returns a 0.90 superblock as the kernel's super_90_sync writes it
// for member 0 of a clean two-device raid1.
func mk090() *SuperblockV090 {
	sb := &SuperblockV090{
		Magic: Magic, MinorVersion: 90,
		SetUUID0: 0x01234567, SetUUID1: 0x89abcdef, SetUUID2: 0xfedcba98, SetUUID3: 0x76543210,
		CTime: 1723397006, Level: 1, Size: 102336, NrDisks: 2, RaidDisks: 2, MDMinor: 0,
		UTime: 1723397010, State: SB090Clean, ActiveDisks: 2, WorkingDisks: 2,
		RecoveryCP: 0, ChunkSize: 0,
	}
	sb.SetEvents(0x100000011)
	sb.CPEventsHi, sb.CPEventsLo = 1, 0x11
	for i := 0; i < 2; i++ {
		sb.Disks[i] = Disk090{Number: uint32(i), Major: 7, Minor: uint32(i), RaidDisk: uint32(i), State: Disk090Active | Disk090Sync}
	}
	sb.ThisDisk = sb.Disks[0]
	return sb
}

func TestOffset090(t *testing.T) {
	for _, c := range []struct{ dev, want uint64 }{
		{0, 0},
		{64<<10 - 1, 0},
		{64 << 10, 0},
		{128<<10 - 1, 0},
		{128 << 10, 64 << 10},
		{100<<20 + 12345, 100<<20 - 64<<10},
		{1 << 30, 1<<30 - 64<<10},
		{2<<40 + 4096, 2<<40 - 64<<10},
	} {
		if got := Offset090(c.dev); got != c.want {
			t.Errorf("Offset090(%d) = %d, want %d", c.dev, got, c.want)
		}
		// Same as MD_NEW_SIZE_SECTORS on the sector count, in bytes.
		if s := c.dev >> 9; c.dev >= MinDevBytes090 {
			if got := (s&^127 - 128) * 512; got != c.want {
				t.Errorf("MD_NEW_SIZE_SECTORS(%d)*512 = %d, want %d", s, got, c.want)
			}
		}
	}
}

func TestParse090(t *testing.T) {
	sb := mk090()
	b := sb.MarshalWithChecksum()
	if len(b) != Size090 {
		t.Fatalf("Marshal090 length %d", len(b))
	}
	// Layout spot checks against md_p.h word offsets.
	le32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
	for _, c := range []struct {
		off  int
		want uint32
	}{
		{0, Magic}, {8, 90}, {5 * 4, 0x01234567}, {13 * 4, 0x89abcdef}, {15 * 4, 0x76543210},
		{7 * 4, 1}, {10 * 4, 2}, {(32 + 1) * 4, SB090Clean}, {(32 + 7) * 4, 0x11}, {(32 + 8) * 4, 1},
		{128*4 + 32*4*1 + 3*4, 1}, {992 * 4, 0}, {992*4 + 4*4, Disk090Active | Disk090Sync},
		{(32 + 6) * 4, sb.Checksum},
	} {
		if got := le32(c.off); got != c.want {
			t.Errorf("word at %#x = %#x, want %#x", c.off, got, c.want)
		}
	}
	got, err := Parse090(b)
	if err != nil {
		t.Fatalf("Parse090: %v", err)
	}
	if *got != *sb {
		t.Errorf("Parse090(Marshal) = %+v\nwant %+v", got, sb)
	}
	if got.Events() != 0x100000011 || got.CPEvents() != 0x100000011 {
		t.Errorf("events %#x %#x", got.Events(), got.CPEvents())
	}
	if u := FormatUUID(got.UUID()); u != "01234567:89abcdef:fedcba98:76543210" {
		t.Errorf("UUID %s", u)
	}
	if !bytes.Equal(got.Marshal(), b) {
		t.Error("round trip differs")
	}
	// The checksum is the plain 32-bit sum of the words.
	var sum uint64
	for i := 0; i < Size090; i += 4 {
		if i != 0x98 {
			sum += uint64(le32(i))
		}
	}
	if want := uint32(sum) + uint32(sum>>32); Checksum090(b, false) != want {
		t.Errorf("Checksum090 = %#x, want %#x", Checksum090(b, false), want)
	}

	old := mk090()
	old.MinorVersion = 89
	if u := FormatUUID(old.UUID()); u != "01234567:00000000:00000000:00000000" {
		t.Errorf("pre-0.90 UUID %s", u)
	}
}

func TestParse090BigEndian(t *testing.T) {
	sb := mk090()
	sb.BigEndian = true
	sb.ReshapePosition = 0x0102030405060708
	sb.MinorVersion = 91
	b := sb.MarshalWithChecksum()
	if b[0] != 0xa9 || b[3] != 0xfc {
		t.Fatalf("magic bytes % x", b[:4])
	}
	// On a big-endian host events_hi comes first.
	if binary.BigEndian.Uint32(b[0x9C:]) != 1 || binary.BigEndian.Uint32(b[0xA0:]) != 0x11 {
		t.Errorf("events words % x", b[0x9C:0xA4])
	}
	if !bytes.Equal(b[0xB0:0xB8], []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("reshape_position bytes % x", b[0xB0:0xB8])
	}
	got, err := Parse090(b)
	fes := formatErrors(t, err)
	if len(fes) != 1 || !errors.Is(err, ErrByteSwapped) || fes[0].Field != "md_magic" {
		t.Fatalf("want only ErrByteSwapped, got %v", err)
	}
	if got == nil || *got != *sb {
		t.Fatalf("decoded %+v\nwant %+v", got, sb)
	}
	if !bytes.Equal(got.Marshal(), b) {
		t.Error("big-endian round trip differs")
	}
	// Read as little-endian words the checksum would not match.
	if Checksum090(b, false) == sb.Checksum {
		t.Error("checksum does not depend on byte order")
	}
}

func TestParse090Rules(t *testing.T) {
	cases := []struct {
		name  string
		mod   func(sb *SuperblockV090)
		raw   func(b []byte)
		err   error
		off   int64
		field string
	}{
		{name: "valid 0.90"},
		{name: "valid 0.91", mod: func(sb *SuperblockV090) { sb.MinorVersion = 91 }},
		{name: "major 1", mod: func(sb *SuperblockV090) { sb.MajorVersion = 1 }, err: ErrVersion, off: 4, field: "major_version"},
		{name: "minor 89", mod: func(sb *SuperblockV090) { sb.MinorVersion = 89 }, err: ErrVersion, off: 8, field: "minor_version"},
		{name: "minor 92", mod: func(sb *SuperblockV090) { sb.MinorVersion = 92 }, err: ErrVersion, off: 8, field: "minor_version"},
		{name: "raid_disks 0", mod: func(sb *SuperblockV090) { sb.RaidDisks = 0 }, err: ErrRaidDisks, off: 0x28, field: "raid_disks"},
		{name: "checksum", raw: func(b []byte) { b[0x98] ^= 0x10 }, err: ErrChecksum, off: 0x98, field: "sb_csum"},
		{name: "last word", raw: func(b []byte) { b[4095] ^= 1 }, err: ErrChecksum, off: 0x98, field: "sb_csum"},
	}
	for _, c := range cases {
		sb := mk090()
		if c.mod != nil {
			c.mod(sb)
		}
		b := sb.MarshalWithChecksum()
		if c.raw != nil {
			c.raw(b)
		}
		got, err := Parse090(b)
		if got == nil {
			t.Fatalf("%s: no superblock (%v)", c.name, err)
		}
		if c.err == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		fes := formatErrors(t, err)
		if len(fes) != 1 || !errors.Is(err, c.err) || fes[0].Offset != c.off || fes[0].Field != c.field {
			t.Errorf("%s: got %v, want %v at %#x %s", c.name, err, c.err, c.off, c.field)
		}
	}
	if sb, err := Parse090(make([]byte, Size090-1)); sb != nil || err != ErrShort {
		t.Errorf("short: %v %v", sb, err)
	}
	b := mk090().MarshalWithChecksum()
	b[1] ^= 1
	if sb, err := Parse090(b); sb != nil || err != ErrBadMagic {
		t.Errorf("bad magic: %v %v", sb, err)
	}
}

// TestParse090KernelFold: the kernel compares 0.90 checksums folded to 16
// bits; the message says so when only the 32-bit sums differ.
func TestParse090KernelFold(t *testing.T) {
	sb := mk090()
	b := sb.MarshalWithChecksum()
	if sb.Checksum > 0xffff0000 {
		t.Fatalf("checksum %#x too close to overflow for this construction", sb.Checksum)
	}
	binary.LittleEndian.PutUint32(b[0x98:], sb.Checksum+0xffff)
	_, err := Parse090(b)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "kernel accepts") {
		t.Errorf("got %v", err)
	}
	binary.LittleEndian.PutUint32(b[0x98:], sb.Checksum+1)
	_, err = Parse090(b)
	if !errors.Is(err, ErrChecksum) || strings.Contains(err.Error(), "kernel accepts") {
		t.Errorf("got %v", err)
	}
}

func TestCheckDevice090(t *testing.T) {
	sb := mk090()
	dev := uint64(100 << 20)
	sb.Size = uint32(Offset090(dev) >> 10)
	if err := sb.CheckDevice(dev); err != nil {
		t.Errorf("exact fit: %v", err)
	}
	if err := sb.CheckDevice(dev - 1); err == nil || !errors.Is(err, ErrDataSize) {
		t.Errorf("one byte smaller device: %v", err)
	} else if fes := formatErrors(t, err); len(fes) != 1 || fes[0].Field != "size" || fes[0].Offset != 0x20 {
		t.Errorf("error %v", err)
	}
	if err := sb.CheckDevice(MinDevBytes090 - 1); !errors.Is(err, ErrDeviceTooSmall) {
		t.Errorf("tiny device: %v", err)
	}
	sb.Level = 0
	if err := sb.CheckDevice(dev - 1); err != nil {
		t.Errorf("raid0 is not checked: %v", err)
	}
	sb.Level = LevelLinear // unsigned compare in the kernel: checked
	if err := sb.CheckDevice(dev - 1); !errors.Is(err, ErrDataSize) {
		t.Errorf("linear: %v", err)
	}
	// The largest size field fits exactly under the kernel's 2^33-2 sector cap.
	sb.Level, sb.Size = 1, 1<<32-1
	if err := sb.CheckDevice(8 << 40); err != nil {
		t.Errorf("at the 0.90 limit: %v", err)
	}
}
