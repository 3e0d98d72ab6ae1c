// Package layout maps sectors of a Linux md array to member devices and
// member sectors exactly as the Linux 6.1 md personalities do (linear,
// raid0, raid1, raid10, raid4/5/6).
//
// The package is pure arithmetic: it is built from plain numbers taken from
// the superblock and does no I/O. All sectors are 512-byte units. Member
// sectors are relative to the member's data_offset: the caller adds
// data_offset before touching the device.
//
// Sources of the rules (Linux 6.1, drivers/md): md-linear.c linear_conf and
// which_dev; raid0.c create_strip_zones, find_zone and map_sector; raid10.c
// setup_geo, calc_sectors, raid10_size, __raid10_find_phys and
// raid10_find_virt; raid5.c raid5_compute_sector, raid5_size, raid6_d0 and
// raid6_idx_to_slot.
package layout

import (
	"errors"
	"fmt"

	"mdtool/superblock"
)

// Level is the md RAID level as stored in the superblock.
type Level int

// The levels this package maps (the format's numbers, package superblock).
const (
	Linear Level = superblock.LevelLinear
	RAID0  Level = superblock.LevelRAID0
	RAID1  Level = superblock.LevelRAID1
	RAID4  Level = superblock.LevelRAID4
	RAID5  Level = superblock.LevelRAID5
	RAID6  Level = superblock.LevelRAID6
	RAID10 Level = superblock.LevelRAID10
	// Multipath is md's multipath personality: every member is a path to
	// the same disk, mapped as raid1 maps its mirrors.
	Multipath Level = superblock.LevelMultipath
)

func (l Level) String() string {
	switch l {
	case Linear:
		return "linear"
	case RAID0, RAID1, RAID4, RAID5, RAID6, RAID10:
		return fmt.Sprintf("raid%d", int(l))
	case Multipath:
		return "multipath"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// RAID0 layout values and raid5/raid6 algorithms: the superblock's
// layout field (package superblock).
const (
	RAID0Original  = superblock.LayoutRAID0Original
	RAID0Alternate = superblock.LayoutRAID0Alternate

	LeftAsymmetric   = superblock.LayoutLeftAsymmetric
	RightAsymmetric  = superblock.LayoutRightAsymmetric
	LeftSymmetric    = superblock.LayoutLeftSymmetric
	RightSymmetric   = superblock.LayoutRightSymmetric
	ParityFirst      = superblock.LayoutParityFirst
	ParityLast       = superblock.LayoutParityLast
	DDFZeroRestart   = superblock.LayoutDDFZeroRestart
	DDFNRestart      = superblock.LayoutDDFNRestart
	DDFNContinue     = superblock.LayoutDDFNContinue
	LeftAsymmetric6  = superblock.LayoutLeftAsymmetric6
	RightAsymmetric6 = superblock.LayoutRightAsymmetric6
	LeftSymmetric6   = superblock.LayoutLeftSymmetric6
	RightSymmetric6  = superblock.LayoutRightSymmetric6
	ParityFirst6     = superblock.LayoutParityFirst6
)

const (
	pageSectors        = 8 // PAGE_SIZE (4096) in sectors
	maxRAID10LayoutBit = 19
)

// Errors returned by New and the per-level constructors.
var (
	// ErrInvalid reports parameters the kernel would refuse.
	ErrInvalid = errors.New("layout: invalid geometry")
	// ErrRAID0Layout reports a multi-zone raid0 without a usable layout:
	// the kernel refuses to start it ("cannot assemble multi-zone RAID0
	// with default_layout setting", ENOTSUPP).
	ErrRAID0Layout = errors.New("layout: multi-zone raid0 needs layout original (1) or alternate (2)")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Params are the numbers a geometry is built from, as found in a v1.x
// superblock.
type Params struct {
	Level Level
	// Layout is the superblock layout field. raid0: RAID0Original,
	// RAID0Alternate, anything else means "not recorded" (-1 when the
	// feature bit is absent). raid4: ignored. raid5/6: the algorithm.
	// raid10: near copies in bits 0-7, far copies in bits 8-15, offset flag
	// bit 16, far-set version in bits 17-18.
	Layout int
	// ChunkSectors is the chunk size in sectors (superblock chunksize).
	// linear: the rounding, 0 for none. raid1: ignored.
	ChunkSectors uint64
	// RaidDisks is the number of roles (superblock raid_disks).
	RaidDisks int
	// ComponentSectors is the per-member size used by raid1, raid4/5/6
	// and raid10 (superblock size field).
	ComponentSectors uint64
	// DevSectors holds, per role, the usable size of each member for
	// linear and raid0 (superblock data_size of the device in that role).
	// The kernel rounds these down to the chunk size; pass them unrounded.
	DevSectors []uint64
}

// Loc is one place an array sector lives.
type Loc struct {
	Role   int    // role (slot) of the member, 0..RaidDisks-1
	Sector uint64 // sector on the member, relative to its data_offset
}

// Geometry maps array sectors to members. Implementations are immutable
// and safe for concurrent use.
type Geometry interface {
	Level() Level
	RaidDisks() int
	// ChunkSectors is the chunk size in sectors (0 where the level has
	// none).
	ChunkSectors() uint64
	// ArraySectors is the size of the array device in sectors.
	ArraySectors() uint64
	// DevSectors is the number of sectors of the member in role that the
	// array uses (from data_offset): the range a resync or rebuild covers.
	DevSectors(role int) uint64
	// MaxCopies is the largest number of Locs Map can return.
	MaxCopies() int
	// Map returns every place array sector s is stored, appended to
	// dst[:0] (no allocation when cap(dst) >= MaxCopies()), and run, the
	// number of sectors from s on that keep the same members with
	// consecutive member sectors (at least 1). For raid4/5/6 the single Loc
	// is the data block; parity is described by *Striped. s must be below
	// ArraySectors.
	Map(s uint64, dst []Loc) (locs []Loc, run uint64)
	// Unmap is the inverse of Map: the array sector stored at sector of
	// the member in role. ok is false for parity blocks and for space that
	// holds no array data.
	Unmap(role int, sector uint64) (s uint64, ok bool)
	// IOMin and IOOpt are the minimum_io_size and optimal_io_size (bytes)
	// the md personality sets on the array queue; 0 means md sets none and
	// the value is stacked from the members.
	IOMin() uint64
	IOOpt() uint64
}

// New builds the geometry for p.
func New(p Params) (Geometry, error) {
	switch p.Level {
	case Linear:
		return NewLinear(p)
	case RAID0:
		return NewRAID0(p)
	case RAID1, Multipath:
		return NewRAID1(p)
	case RAID10:
		return NewRAID10(p)
	case RAID4, RAID5, RAID6:
		return NewStriped(p)
	}
	return nil, invalid("unsupported level %d", int(p.Level))
}

func isPow2(v uint64) bool { return v != 0 && v&(v-1) == 0 }

func log2(v uint64) uint {
	var s uint
	for v > 1 {
		v >>= 1
		s++
	}
	return s
}
