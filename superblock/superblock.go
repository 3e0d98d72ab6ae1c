// Package superblock reads and writes the Linux md v1.x superblock
// (struct mdp_superblock_1) byte for byte as the md driver and mdadm do.
//
// It is a pure format package: bytes in, bytes out. Nothing here performs
// I/O. All multi-byte fields are little-endian. "Sector" always means 512
// bytes, whatever the device's logical block size.
package superblock

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic is MD_SB_MAGIC, shared by 0.90 and 1.x superblocks.
const Magic = 0xa92b4efc

// HeaderSize is the size of the fixed part of the v1 superblock, before
// dev_roles.
const HeaderSize = 256

// MaxDevs is the largest max_dev the kernel accepts: (4096-256)/2.
const MaxDevs = (4096 - HeaderSize) / 2

// AreaSize is the space reserved for a v1 superblock (4 KiB).
const AreaSize = 4096

// Role values stored in dev_roles. Any other value is an active slot
// number; the kernel treats a device as active (not spare) when its role
// is below RoleMax.
const (
	RoleSpare   = 0xffff // MD_DISK_ROLE_SPARE
	RoleFaulty  = 0xfffe // MD_DISK_ROLE_FAULTY
	RoleJournal = 0xfffd // MD_DISK_ROLE_JOURNAL: raid4/5/6 write journal
	RoleMax     = 0xff00 // MD_DISK_ROLE_MAX: roles below this are active slots
)

// MaxSector is the resync_offset value meaning "clean / fully in sync".
const MaxSector = ^uint64(0)

// Feature bits (feature_map), MD_FEATURE_* in md_p.h.
const (
	FeatureBitmapOffset     = 1 << 0    // bitmap_offset is valid (internal bitmap)
	FeatureRecoveryOffset   = 1 << 1    // recovery_offset is valid (partly rebuilt)
	FeatureReshapeActive    = 1 << 2    // reshape fields are valid
	FeatureBadBlocks        = 1 << 3    // the bad-block log is not empty
	FeatureReplacement      = 1 << 4    // this device replaces the active one with its role
	FeatureReshapeBackwards = 1 << 5    // reshape runs backwards, disk count unchanged
	FeatureNewOffset        = 1 << 6    // new_offset is valid
	FeatureRecoveryBitmap   = 1 << 7    // recovery is guided by the bitmap
	FeatureClustered        = 1 << 8    // md-cluster
	FeatureJournal          = 1 << 9    // raid4/5/6 write journal
	FeaturePPL              = 1 << 10   // partial parity log (raid5)
	FeatureMultiplePPLs     = 1 << 11   // multiple partial parity logs
	FeatureRAID0Layout      = 1 << 12   // layout is meaningful for raid0
	FeatureAll              = 1<<13 - 1 // every bit the kernel knows (MD_FEATURE_ALL)
)

// Device flags (devflags).
const (
	DevFlagWriteMostly = 1 << 0 // WriteMostly1
	DevFlagFailFast    = 1 << 1 // FailFast1
)

// Levels as stored in the level field (signed).
const (
	LevelLinear    = -1
	LevelMultipath = -4
	LevelFaulty    = -5
	LevelRAID0     = 0
	LevelRAID1     = 1
	LevelRAID4     = 4
	LevelRAID5     = 5
	LevelRAID6     = 6
	LevelRAID10    = 10
)

// Layout values as stored in the layout field: raid0's layouts (honoured
// only with FeatureRAID0Layout) and the raid4/5/6 algorithms (md's
// ALGORITHM_*). raid10's layout is a bit field: near copies in bits 0-7,
// far copies in bits 8-15, offset in bit 16 (RAID10Near, RAID10Far,
// RAID10Offset read it).
const (
	LayoutRAID0Dangerous = 0 // unspecified (RAID0_ORIG_LAYOUT not recorded)
	LayoutRAID0Original  = 1 // RAID0_ORIG_LAYOUT: kernels before 3.14
	LayoutRAID0Alternate = 2 // RAID0_ALT_MULTIZONE_LAYOUT: 3.14 and later

	LayoutLeftAsymmetric   = 0
	LayoutRightAsymmetric  = 1
	LayoutLeftSymmetric    = 2
	LayoutRightSymmetric   = 3
	LayoutParityFirst      = 4
	LayoutParityLast       = 5
	LayoutDDFZeroRestart   = 8
	LayoutDDFNRestart      = 9
	LayoutDDFNContinue     = 10
	LayoutLeftAsymmetric6  = 16
	LayoutRightAsymmetric6 = 17
	LayoutLeftSymmetric6   = 18
	LayoutRightSymmetric6  = 19
	LayoutParityFirst6     = 20
)

// RAID10Near is the near-copies count of a raid10 layout value.
func RAID10Near(layout uint32) int { return int(layout & 255) }

// RAID10Far is the far-copies count of a raid10 layout value.
func RAID10Far(layout uint32) int { return int(layout >> 8 & 255) }

// RAID10Offset reports whether a raid10 layout value has the offset bit
// (far copies offset by one chunk instead of a device's half).
func RAID10Offset(layout uint32) bool { return layout&0x10000 != 0 }

// ErrBadMagic is returned when the buffer does not start with MD_SB_MAGIC.
var ErrBadMagic = errors.New("superblock: bad magic")

// ErrShort is returned when the buffer is too small to hold a superblock.
var ErrShort = errors.New("superblock: buffer too short")

// FormatError describes a damaged or unacceptable field, with its byte offset
// inside the superblock.
//
// Err, when set, is the sentinel (ErrChecksum, ErrVersion, ...) naming the
// rule that was broken, so that errors.Is(err, ErrChecksum) works on a
// single FormatError and on the errors.Join of several.
type FormatError struct {
	Offset int64  // byte offset of the field within the superblock
	Field  string // C field name, e.g. "sb_csum"
	Msg    string // what is wrong, e.g. "1b22e475 - expected 1b22e476"
	Err    error  // rule sentinel, may be nil
}

// Error formats the error as "superblock: FIELD at offset 0xOFF: MSG".
func (e *FormatError) Error() string {
	return fmt.Sprintf("superblock: %s at offset 0x%x: %s", e.Field, e.Offset, e.Msg)
}

// Unwrap returns the rule sentinel, for errors.Is.
func (e *FormatError) Unwrap() error { return e.Err }

// Time is the v1.x ctime/utime encoding: low 40 bits seconds since the
// epoch, high 24 bits microseconds (mdadm writes 0 there).
type Time uint64

// Seconds returns the seconds part.
func (t Time) Seconds() int64 { return int64(uint64(t) & 0xffffffffff) }

// Micros returns the microseconds part.
func (t Time) Micros() uint32 { return uint32(uint64(t) >> 40) }

// MakeTime encodes seconds and microseconds.
func MakeTime(sec int64, usec uint32) Time {
	return Time(uint64(sec)&0xffffffffff | uint64(usec&0xffffff)<<40)
}

// Superblock is a decoded struct mdp_superblock_1. Field names follow the
// kernel's; comments give the byte offset.
type Superblock struct {
	Magic        uint32   // 0x00
	MajorVersion uint32   // 0x04
	FeatureMap   uint32   // 0x08
	Pad0         uint32   // 0x0C must be zero
	SetUUID      [16]byte // 0x10
	SetName      [32]byte // 0x20
	CTime        Time     // 0x40
	Level        int32    // 0x48
	Layout       uint32   // 0x4C
	Size         uint64   // 0x50 component size, sectors
	ChunkSize    uint32   // 0x58 sectors
	RaidDisks    uint32   // 0x5C
	BitmapOffset int32    // 0x60 signed sectors from the superblock (also PPL offset/size)

	NewLevel        int32  // 0x64
	ReshapePosition uint64 // 0x68
	DeltaDisks      int32  // 0x70
	NewLayout       uint32 // 0x74
	NewChunk        uint32 // 0x78
	NewOffset       int32  // 0x7C

	DataOffset       uint64   // 0x80
	DataSize         uint64   // 0x88
	SuperOffset      uint64   // 0x90
	RecoveryOffset   uint64   // 0x98 (journal_tail on a journal device)
	DevNumber        uint32   // 0xA0
	CntCorrectedRead uint32   // 0xA4
	DeviceUUID       [16]byte // 0xA8
	DevFlags         uint8    // 0xB8
	BBLogShift       uint8    // 0xB9
	BBLogSize        uint16   // 0xBA sectors
	BBLogOffset      int32    // 0xBC signed sectors from the superblock

	UTime        Time     // 0xC0
	Events       uint64   // 0xC8
	ResyncOffset uint64   // 0xD0
	Checksum     uint32   // 0xD8 sb_csum
	MaxDev       uint32   // 0xDC
	Pad3         [32]byte // 0xE0 must be zero

	DevRoles []uint16 // 0x100, MaxDev entries
}

// PPLOffset returns the signed PPL offset (sectors from the superblock),
// meaningful only with FeaturePPL.
func (sb *Superblock) PPLOffset() int16 { return int16(uint32(sb.BitmapOffset) & 0xffff) }

// PPLSize returns the PPL size in sectors, meaningful only with FeaturePPL.
func (sb *Superblock) PPLSize() uint16 { return uint16(uint32(sb.BitmapOffset) >> 16) }

// SetPPL stores the PPL offset and size in the bitmap_offset union.
func (sb *Superblock) SetPPL(offset int16, size uint16) {
	sb.BitmapOffset = int32(uint32(uint16(offset)) | uint32(size)<<16)
}

// Name returns set_name up to the first NUL.
func (sb *Superblock) Name() string {
	for i, c := range sb.SetName {
		if c == 0 {
			return string(sb.SetName[:i])
		}
	}
	return string(sb.SetName[:])
}

// SetNameString stores s in set_name, NUL padded, truncated to 32 bytes.
func (sb *Superblock) SetNameString(s string) {
	sb.SetName = [32]byte{}
	copy(sb.SetName[:], s)
}

// EncodedSize is the number of bytes the checksum covers and the kernel
// reads: 256 + 2*max_dev.
func (sb *Superblock) EncodedSize() int { return HeaderSize + 2*int(sb.MaxDev) }

// WriteSize is the number of bytes mdadm writes for this superblock:
// EncodedSize rounded up to 512.
func (sb *Superblock) WriteSize() int { return (sb.EncodedSize() + 511) &^ 511 }

var le = binary.LittleEndian

// Marshal encodes the superblock into WriteSize() bytes, but never more
// than AreaSize (a max_dev beyond MaxDevs, possible on a damaged superblock
// returned by Parse, cannot make it allocate gigabytes). Roles beyond
// len(DevRoles) up to the end of the buffer are written as 0xffff, as mdadm
// does. The checksum field is written from sb.Checksum as it is; use
// MarshalWithChecksum to store a correct one.
func (sb *Superblock) Marshal() []byte {
	n := sb.WriteSize()
	if n < HeaderSize {
		n = HeaderSize
	}
	if n > AreaSize {
		n = AreaSize
	}
	b := make([]byte, n)
	sb.put(b)
	return b
}

// MarshalWithChecksum recomputes sb.Checksum and encodes.
func (sb *Superblock) MarshalWithChecksum() []byte {
	b := sb.Marshal()
	sb.Checksum = Checksum(b)
	le.PutUint32(b[0xD8:], sb.Checksum)
	return b
}

func (sb *Superblock) put(b []byte) {
	le.PutUint32(b[0x00:], sb.Magic)
	le.PutUint32(b[0x04:], sb.MajorVersion)
	le.PutUint32(b[0x08:], sb.FeatureMap)
	le.PutUint32(b[0x0C:], sb.Pad0)
	copy(b[0x10:0x20], sb.SetUUID[:])
	copy(b[0x20:0x40], sb.SetName[:])
	le.PutUint64(b[0x40:], uint64(sb.CTime))
	le.PutUint32(b[0x48:], uint32(sb.Level))
	le.PutUint32(b[0x4C:], sb.Layout)
	le.PutUint64(b[0x50:], sb.Size)
	le.PutUint32(b[0x58:], sb.ChunkSize)
	le.PutUint32(b[0x5C:], sb.RaidDisks)
	le.PutUint32(b[0x60:], uint32(sb.BitmapOffset))
	le.PutUint32(b[0x64:], uint32(sb.NewLevel))
	le.PutUint64(b[0x68:], sb.ReshapePosition)
	le.PutUint32(b[0x70:], uint32(sb.DeltaDisks))
	le.PutUint32(b[0x74:], sb.NewLayout)
	le.PutUint32(b[0x78:], sb.NewChunk)
	le.PutUint32(b[0x7C:], uint32(sb.NewOffset))
	le.PutUint64(b[0x80:], sb.DataOffset)
	le.PutUint64(b[0x88:], sb.DataSize)
	le.PutUint64(b[0x90:], sb.SuperOffset)
	le.PutUint64(b[0x98:], sb.RecoveryOffset)
	le.PutUint32(b[0xA0:], sb.DevNumber)
	le.PutUint32(b[0xA4:], sb.CntCorrectedRead)
	copy(b[0xA8:0xB8], sb.DeviceUUID[:])
	b[0xB8] = sb.DevFlags
	b[0xB9] = sb.BBLogShift
	le.PutUint16(b[0xBA:], sb.BBLogSize)
	le.PutUint32(b[0xBC:], uint32(sb.BBLogOffset))
	le.PutUint64(b[0xC0:], uint64(sb.UTime))
	le.PutUint64(b[0xC8:], sb.Events)
	le.PutUint64(b[0xD0:], sb.ResyncOffset)
	le.PutUint32(b[0xD8:], sb.Checksum)
	le.PutUint32(b[0xDC:], sb.MaxDev)
	copy(b[0xE0:0x100], sb.Pad3[:])
	for i := 0x100; i+1 < len(b); i += 2 {
		r := (i - 0x100) / 2
		v := uint16(RoleSpare)
		if r < len(sb.DevRoles) {
			v = sb.DevRoles[r]
		}
		le.PutUint16(b[i:], v)
	}
}

// Checksum computes calc_sb_1_csum over b, which must hold at least
// 256+2*max_dev bytes (max_dev read from b). The stored sb_csum is treated
// as zero. If b is shorter, the sum covers what is there.
func Checksum(b []byte) uint32 {
	if len(b) < HeaderSize {
		return 0
	}
	size := HeaderSize + 2*int(le.Uint32(b[0xDC:]))
	if size > len(b) {
		size = len(b)
	}
	var sum uint64
	i := 0
	for ; size-i >= 4; i += 4 {
		if i == 0xD8 {
			continue
		}
		sum += uint64(le.Uint32(b[i:]))
	}
	if size-i == 2 {
		sum += uint64(le.Uint16(b[i:]))
	}
	return uint32(sum&0xffffffff + sum>>32)
}

// decode fills sb from b (len(b) >= HeaderSize) without any validation.
// Roles are read for min(max_dev, available) entries.
func decode(b []byte) *Superblock {
	sb := &Superblock{
		Magic:            le.Uint32(b[0x00:]),
		MajorVersion:     le.Uint32(b[0x04:]),
		FeatureMap:       le.Uint32(b[0x08:]),
		Pad0:             le.Uint32(b[0x0C:]),
		CTime:            Time(le.Uint64(b[0x40:])),
		Level:            int32(le.Uint32(b[0x48:])),
		Layout:           le.Uint32(b[0x4C:]),
		Size:             le.Uint64(b[0x50:]),
		ChunkSize:        le.Uint32(b[0x58:]),
		RaidDisks:        le.Uint32(b[0x5C:]),
		BitmapOffset:     int32(le.Uint32(b[0x60:])),
		NewLevel:         int32(le.Uint32(b[0x64:])),
		ReshapePosition:  le.Uint64(b[0x68:]),
		DeltaDisks:       int32(le.Uint32(b[0x70:])),
		NewLayout:        le.Uint32(b[0x74:]),
		NewChunk:         le.Uint32(b[0x78:]),
		NewOffset:        int32(le.Uint32(b[0x7C:])),
		DataOffset:       le.Uint64(b[0x80:]),
		DataSize:         le.Uint64(b[0x88:]),
		SuperOffset:      le.Uint64(b[0x90:]),
		RecoveryOffset:   le.Uint64(b[0x98:]),
		DevNumber:        le.Uint32(b[0xA0:]),
		CntCorrectedRead: le.Uint32(b[0xA4:]),
		DevFlags:         b[0xB8],
		BBLogShift:       b[0xB9],
		BBLogSize:        le.Uint16(b[0xBA:]),
		BBLogOffset:      int32(le.Uint32(b[0xBC:])),
		UTime:            Time(le.Uint64(b[0xC0:])),
		Events:           le.Uint64(b[0xC8:]),
		ResyncOffset:     le.Uint64(b[0xD0:]),
		Checksum:         le.Uint32(b[0xD8:]),
		MaxDev:           le.Uint32(b[0xDC:]),
	}
	copy(sb.SetUUID[:], b[0x10:0x20])
	copy(sb.SetName[:], b[0x20:0x40])
	copy(sb.DeviceUUID[:], b[0xA8:0xB8])
	copy(sb.Pad3[:], b[0xE0:0x100])
	n := int(sb.MaxDev)
	if avail := (len(b) - HeaderSize) / 2; n > avail {
		n = avail
	}
	sb.DevRoles = make([]uint16, n)
	for i := range sb.DevRoles {
		sb.DevRoles[i] = le.Uint16(b[HeaderSize+2*i:])
	}
	return sb
}
