package superblock

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// v0.90 geometry (md_p.h).
const (
	// Size090 is MD_SB_BYTES, the size of a 0.90 superblock.
	Size090 = 4096
	// Reserved090 is MD_RESERVED_BYTES: the 0.90 superblock lives in the
	// last 64 KiB-aligned 64 KiB of the device.
	Reserved090 = 64 << 10
	// Disks090 is MD_SB_DISKS, the number of disk descriptors.
	Disks090 = 27
)

// Superblock state bits of a 0.90 superblock (state field).
const (
	SB090Clean                 = 1 << 0 // MD_SB_CLEAN
	SB090Errors                = 1 << 1 // MD_SB_ERRORS
	SB090BBMErrors             = 1 << 2 // MD_SB_BBM_ERRORS
	SB090BlockContainerReshape = 1 << 3 // MD_SB_BLOCK_CONTAINER_RESHAPE
	SB090BlockVolume           = 1 << 4 // MD_SB_BLOCK_VOLUME
	SB090Clustered             = 1 << 5 // MD_SB_CLUSTERED
	SB090BitmapPresent         = 1 << 8 // MD_SB_BITMAP_PRESENT: bitmap 4 KiB after the superblock
)

// Disk descriptor state bits of a 0.90 superblock (mdp_disk_t.state).
const (
	Disk090Faulty      = 1 << 0  // MD_DISK_FAULTY
	Disk090Active      = 1 << 1  // MD_DISK_ACTIVE
	Disk090Sync        = 1 << 2  // MD_DISK_SYNC
	Disk090Removed     = 1 << 3  // MD_DISK_REMOVED
	Disk090ClusterAdd  = 1 << 4  // MD_DISK_CLUSTER_ADD
	Disk090Candidate   = 1 << 5  // MD_DISK_CANDIDATE
	Disk090WriteMostly = 1 << 9  // MD_DISK_WRITEMOSTLY
	Disk090FailFast    = 1 << 10 // MD_DISK_FAILFAST
	Disk090Replacement = 1 << 17 // MD_DISK_REPLACEMENT
	Disk090Journal     = 1 << 18 // MD_DISK_JOURNAL
)

// ErrByteSwapped reports a 0.90 superblock written by a host of the other
// byte order (its magic reads as 0xfc4e2ba9 little-endian). Parse090 still
// decodes it, in that other byte order.
var ErrByteSwapped = errors.New("superblock: 0.90 superblock is byte-swapped (other-endian host)")

// ErrRaidDisks reports a 0.90 superblock with raid_disks 0, which the
// kernel refuses.
var ErrRaidDisks = errors.New("superblock: raid_disks is zero")

// MinDevBytes090 is the smallest device mdadm accepts for 0.90 metadata
// (MD_RESERVED_BYTES).
const MinDevBytes090 = Reserved090

// Offset090 returns the byte offset of the 0.90 superblock on a device of
// devBytes bytes: (devBytes &^ (64 KiB - 1)) - 64 KiB, the byte form of
// MD_NEW_SIZE_SECTORS. The result is also the usable ("apparent") size of
// the device. Devices smaller than MinDevBytes090 have no such location;
// the caller must check (0 is returned for them).
func Offset090(devBytes uint64) uint64 {
	if devBytes < MinDevBytes090 {
		return 0
	}
	return devBytes&^(Reserved090-1) - Reserved090
}

// Disk090 is a 0.90 disk descriptor (mdp_disk_t, 32 words).
type Disk090 struct {
	Number   uint32     // device number in the entire set
	Major    uint32     // device major number
	Minor    uint32     // device minor number
	RaidDisk uint32     // role in the array
	State    uint32     // Disk090* bits
	Reserved [27]uint32 // words 5-31, unused
}

// SuperblockV090 is a decoded mdp_super_t (0.90), all 1024 words. Field
// comments give the byte offset. The 0.90 format is host-endian; BigEndian
// records which order the bytes were in.
type SuperblockV090 struct {
	BigEndian bool // decoded (and re-encoded) big-endian

	// Constant generic information.
	Magic           uint32     // 0x000 md_magic
	MajorVersion    uint32     // 0x004
	MinorVersion    uint32     // 0x008: 90, or 91 during a reshape
	PatchVersion    uint32     // 0x00C
	GValidWords     uint32     // 0x010
	SetUUID0        uint32     // 0x014
	CTime           uint32     // 0x018 seconds
	Level           int32      // 0x01C
	Size            uint32     // 0x020 used size of each device, KiB
	NrDisks         uint32     // 0x024
	RaidDisks       uint32     // 0x028
	MDMinor         uint32     // 0x02C preferred md minor
	NotPersistent   uint32     // 0x030
	SetUUID1        uint32     // 0x034
	SetUUID2        uint32     // 0x038
	SetUUID3        uint32     // 0x03C
	GStateCReserved [16]uint32 // 0x040

	// Generic state information.
	UTime           uint32     // 0x080
	State           uint32     // 0x084 SB090* bits
	ActiveDisks     uint32     // 0x088
	WorkingDisks    uint32     // 0x08C
	FailedDisks     uint32     // 0x090
	SpareDisks      uint32     // 0x094
	Checksum        uint32     // 0x098 sb_csum
	EventsLo        uint32     // 0x09C (0x0A0 when big-endian)
	EventsHi        uint32     // 0x0A0 (0x09C when big-endian)
	CPEventsLo      uint32     // 0x0A4 (0x0A8 when big-endian)
	CPEventsHi      uint32     // 0x0A8 (0x0A4 when big-endian)
	RecoveryCP      uint32     // 0x0AC
	ReshapePosition uint64     // 0x0B0 (minor_version 91)
	NewLevel        int32      // 0x0B8
	DeltaDisks      int32      // 0x0BC
	NewLayout       uint32     // 0x0C0
	NewChunk        uint32     // 0x0C4 bytes
	GStateSReserved [14]uint32 // 0x0C8

	// Personality information.
	Layout         uint32     // 0x100
	ChunkSize      uint32     // 0x104 bytes
	RootPV         uint32     // 0x108
	RootBlock      uint32     // 0x10C
	PStateReserved [60]uint32 // 0x110

	Disks    [Disks090]Disk090 // 0x200, 128 bytes each
	ThisDisk Disk090           // 0xF80
}

const (
	off090Major     = 0x004
	off090Minor     = 0x008
	off090RaidDisks = 0x028
	off090Checksum  = 0x098
	off090Disks     = 0x200
	off090ThisDisk  = 0xF80
	magicSwapped    = 0xfc4e2ba9
)

// Events returns the 64-bit event counter.
func (sb *SuperblockV090) Events() uint64 { return uint64(sb.EventsHi)<<32 | uint64(sb.EventsLo) }

// CPEvents returns the 64-bit checkpoint event counter.
func (sb *SuperblockV090) CPEvents() uint64 {
	return uint64(sb.CPEventsHi)<<32 | uint64(sb.CPEventsLo)
}

// SetEvents stores a 64-bit event counter.
func (sb *SuperblockV090) SetEvents(ev uint64) {
	sb.EventsHi, sb.EventsLo = uint32(ev>>32), uint32(ev)
}

// UUID returns the array UUID as mdadm uses it (uuid_from_super0): the four
// set_uuid words, each as 8 hex digits in value order, so FormatUUID of the
// result is the text mdadm prints ("%08x:%08x:%08x:%08x"). With a
// minor_version below 90 only set_uuid0 counts and the rest are zero.
func (sb *SuperblockV090) UUID() [16]byte {
	var u [16]byte
	w := [4]uint32{sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3}
	if sb.MinorVersion < 90 {
		w[1], w[2], w[3] = 0, 0, 0
	}
	for i, v := range w {
		binary.BigEndian.PutUint32(u[4*i:], v)
	}
	return u
}

func order090(big bool) binary.ByteOrder {
	if big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Checksum090 computes the 0.90 checksum over the 4096 bytes of b
// (calc_sb0_csum in mdadm, calc_sb_csum in the kernel): the sum of all
// 1024 words, read in the given byte order, with sb_csum taken as zero,
// folded once from 64 to 32 bits. b must hold Size090 bytes.
func Checksum090(b []byte, bigEndian bool) uint32 {
	o := order090(bigEndian)
	var sum uint64
	for i := 0; i+4 <= Size090 && i+4 <= len(b); i += 4 {
		if i == off090Checksum {
			continue
		}
		sum += uint64(o.Uint32(b[i:]))
	}
	return uint32(sum&0xffffffff + sum>>32)
}

// fold16 is the kernel's md_csum_fold: it compares 0.90 checksums folded to
// 16 bits.
func fold16(c uint32) uint32 {
	c = c&0xffff + c>>16
	return c&0xffff + c>>16
}

// Parse090 decodes a 0.90 superblock from b (at least Size090 bytes, read
// at Offset090). It returns nil, ErrShort for a short buffer and nil,
// ErrBadMagic when b does not start with MD_SB_MAGIC in either byte order.
// Otherwise it returns the decoded superblock and an errors.Join of
// *FormatError values for:
//
//   - a big-endian superblock (md_magic, wrapping ErrByteSwapped): decoded
//     big-endian, as a big-endian host wrote it;
//   - major_version not 0, or minor_version not 90 or 91 (ErrVersion; the
//     kernel's rule, mdadm itself only insists on major 0);
//   - raid_disks 0 (ErrRaidDisks, kernel);
//   - sb_csum not equal to Checksum090 (ErrChecksum, message "%x - expected
//     %x" as mdadm --examine; the kernel compares the sums folded to 16 bits
//     and the message says when it would still accept).
func Parse090(b []byte) (*SuperblockV090, error) {
	if len(b) < Size090 {
		return nil, ErrShort
	}
	var errs []error
	bad := func(off int, field string, sentinel error, format string, args ...any) {
		errs = append(errs, &FormatError{Offset: int64(off), Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
	}
	big := false
	switch binary.LittleEndian.Uint32(b) {
	case Magic:
	case magicSwapped:
		big = true
		bad(0, "md_magic", ErrByteSwapped, "magic %08x reads as %08x big-endian: superblock from a big-endian host", uint32(magicSwapped), uint32(Magic))
	default:
		return nil, ErrBadMagic
	}
	sb := decode090(b, big)
	if sb.MajorVersion != 0 {
		bad(off090Major, "major_version", ErrVersion, "version %d, 0.90 superblocks have 0", sb.MajorVersion)
	}
	if sb.MinorVersion < 90 || sb.MinorVersion > 91 {
		bad(off090Minor, "minor_version", ErrVersion, "%d, the kernel accepts 90 and 91", sb.MinorVersion)
	}
	if sb.RaidDisks == 0 {
		bad(off090RaidDisks, "raid_disks", ErrRaidDisks, "0")
	}
	if want := Checksum090(b, big); want != sb.Checksum {
		note := ""
		if fold16(want) == fold16(sb.Checksum) {
			note = " (equal folded to 16 bits: the kernel accepts it)"
		}
		bad(off090Checksum, "sb_csum", ErrChecksum, "%x - expected %x%s", sb.Checksum, want, note)
	}
	return sb, errors.Join(errs...)
}

// words visits every field in on-disk order; word (dword) reads or writes a
// 32-bit (64-bit) value at a byte offset. Both decode and encode use it, so they
// cannot disagree.
func (sb *SuperblockV090) words(big bool, word func(off int, p *uint32), dword func(off int, p *uint64)) {
	i32 := func(off int, p *int32) {
		v := uint32(*p)
		word(off, &v)
		*p = int32(v)
	}
	word(0x000, &sb.Magic)
	word(0x004, &sb.MajorVersion)
	word(0x008, &sb.MinorVersion)
	word(0x00C, &sb.PatchVersion)
	word(0x010, &sb.GValidWords)
	word(0x014, &sb.SetUUID0)
	word(0x018, &sb.CTime)
	i32(0x01C, &sb.Level)
	word(0x020, &sb.Size)
	word(0x024, &sb.NrDisks)
	word(0x028, &sb.RaidDisks)
	word(0x02C, &sb.MDMinor)
	word(0x030, &sb.NotPersistent)
	word(0x034, &sb.SetUUID1)
	word(0x038, &sb.SetUUID2)
	word(0x03C, &sb.SetUUID3)
	for i := range sb.GStateCReserved {
		word(0x040+4*i, &sb.GStateCReserved[i])
	}
	word(0x080, &sb.UTime)
	word(0x084, &sb.State)
	word(0x088, &sb.ActiveDisks)
	word(0x08C, &sb.WorkingDisks)
	word(0x090, &sb.FailedDisks)
	word(0x094, &sb.SpareDisks)
	word(0x098, &sb.Checksum)
	if big {
		word(0x09C, &sb.EventsHi)
		word(0x0A0, &sb.EventsLo)
		word(0x0A4, &sb.CPEventsHi)
		word(0x0A8, &sb.CPEventsLo)
	} else {
		word(0x09C, &sb.EventsLo)
		word(0x0A0, &sb.EventsHi)
		word(0x0A4, &sb.CPEventsLo)
		word(0x0A8, &sb.CPEventsHi)
	}
	word(0x0AC, &sb.RecoveryCP)
	dword(0x0B0, &sb.ReshapePosition)
	i32(0x0B8, &sb.NewLevel)
	i32(0x0BC, &sb.DeltaDisks)
	word(0x0C0, &sb.NewLayout)
	word(0x0C4, &sb.NewChunk)
	for i := range sb.GStateSReserved {
		word(0x0C8+4*i, &sb.GStateSReserved[i])
	}
	word(0x100, &sb.Layout)
	word(0x104, &sb.ChunkSize)
	word(0x108, &sb.RootPV)
	word(0x10C, &sb.RootBlock)
	for i := range sb.PStateReserved {
		word(0x110+4*i, &sb.PStateReserved[i])
	}
	disk := func(off int, d *Disk090) {
		word(off+0, &d.Number)
		word(off+4, &d.Major)
		word(off+8, &d.Minor)
		word(off+12, &d.RaidDisk)
		word(off+16, &d.State)
		for i := range d.Reserved {
			word(off+20+4*i, &d.Reserved[i])
		}
	}
	for i := range sb.Disks {
		disk(off090Disks+128*i, &sb.Disks[i])
	}
	disk(off090ThisDisk, &sb.ThisDisk)
}

func decode090(b []byte, big bool) *SuperblockV090 {
	o := order090(big)
	sb := &SuperblockV090{BigEndian: big}
	sb.words(big,
		func(off int, p *uint32) { *p = o.Uint32(b[off:]) },
		func(off int, p *uint64) { *p = o.Uint64(b[off:]) })
	return sb
}

// Marshal encodes the superblock into Size090 bytes in its byte order
// (BigEndian), with sb_csum as stored in Checksum.
func (sb *SuperblockV090) Marshal() []byte {
	b := make([]byte, Size090)
	o := order090(sb.BigEndian)
	c := *sb // words() takes pointers; keep sb untouched
	c.words(sb.BigEndian,
		func(off int, p *uint32) { o.PutUint32(b[off:], *p) },
		func(off int, p *uint64) { o.PutUint64(b[off:], *p) })
	return b
}

// MarshalWithChecksum recomputes sb.Checksum and encodes.
func (sb *SuperblockV090) MarshalWithChecksum() []byte {
	b := sb.Marshal()
	sb.Checksum = Checksum090(b, sb.BigEndian)
	order090(sb.BigEndian).PutUint32(b[off090Checksum:], sb.Checksum)
	return b
}

// CheckDevice checks the 0.90 rule that needs the member's size in bytes,
// from the kernel's super_90_load: the space before the superblock
// (Offset090, capped at 2^33-2 sectors for levels other than raid0) must
// hold size KiB. The kernel compares the level as an unsigned number, so the
// rule applies to every level but 0 (linear, multipath and faulty included).
// It returns nil, a *FormatError on size wrapping ErrDataSize, or an error
// wrapping ErrDeviceTooSmall for a device below MinDevBytes090.
func (sb *SuperblockV090) CheckDevice(devBytes uint64) error {
	if devBytes < MinDevBytes090 {
		return fmt.Errorf("%w: %d bytes, 0.90 metadata needs at least %d", ErrDeviceTooSmall, devBytes, uint64(MinDevBytes090))
	}
	if sb.Level == 0 {
		return nil
	}
	sectors := Offset090(devBytes) / 512
	if sectors >= 2<<32 {
		sectors = 2<<32 - 2
	}
	if sectors < uint64(sb.Size)*2 {
		return &FormatError{Offset: 0x020, Field: "size", Err: ErrDataSize,
			Msg: fmt.Sprintf("%d KiB per device, but only %d KiB fit before the superblock", sb.Size, sectors/2)}
	}
	return nil
}
