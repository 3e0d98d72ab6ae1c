package engine

import (
	"errors"
	"fmt"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// BuildParams describe an array without superblocks (mdadm --build): what
// mdadm's Build() gives md in SET_ARRAY_INFO with not_persistent set.
type BuildParams struct {
	Level layout.Level
	// Layout: raid0 RAID0Original or RAID0Alternate (a multi-zone raid0
	// needs one; -1, what mdadm 4.2's Build gives md, refuses it), raid10
	// its near/far bits; ignored otherwise.
	Layout int
	// ChunkSectors: raid0/raid10 chunk, linear rounding (0: none).
	ChunkSectors uint64
	// RaidDisks is the number of roles; Roles maps each device given to
	// OpenBuild to its role (the roles missing from it are "missing").
	RaidDisks int
	Roles     []int
	// AssumeClean: md_set_array_info with MD_SB_CLEAN (recovery_cp =
	// MaxSector); otherwise a redundant array starts with a resync.
	AssumeClean bool
	// SizeSectors is SET_ARRAY_INFO's size (mdadm -B --size), 0 for the
	// smallest member's: md 6.1 takes the smaller of the two as the
	// component size, which raid1 and raid10 use; raid0 and linear use
	// the whole members whatever it says.
	SizeSectors uint64
	// WriteMostly, if set, has one entry per device given to OpenBuild:
	// ADD_NEW_DISK's MD_DISK_WRITEMOSTLY (mdadm -B ... -W DEV).
	WriteMostly []bool
}

// ErrBuildLevel: a level OpenBuild does not run.
var ErrBuildLevel = errors.New("engine: level not supported without superblocks")

// OpenBuild starts an array without superblocks on devs, as md runs a
// non-persistent array: every member's data starts at sector 0 and spans
// the whole device (add_new_disk: sb_start = the device size, data_offset
// 0), the component size is the smallest member (bind_rdev_to_array),
// and nothing is ever written outside the data (md_update_sb returns at
// once). opts.Metadata is ignored.
func OpenBuild(devs []Device, bp BuildParams, opts Options) (*Array, error) {
	switch bp.Level {
	case layout.Linear, layout.RAID0, layout.RAID1, layout.RAID10:
	default:
		return nil, fmt.Errorf("%w: %v", ErrBuildLevel, bp.Level)
	}
	if len(devs) == 0 || len(bp.Roles) != len(devs) || bp.RaidDisks < len(devs) {
		return nil, fmt.Errorf("%w: %d devices for %d roles", ErrUnsupported, len(devs), bp.RaidDisks)
	}
	opts = opts.withDefaults()
	opts.NotPersistent = true
	as, err := buildAssembly(devs, bp)
	if err != nil {
		return nil, err
	}
	return openAssembled(devs, as, opts)
}

// buildAssembly makes up the in-memory superblocks of a non-persistent
// array: they hold what md keeps in the mddev and rdevs.
func buildAssembly(devs []Device, bp BuildParams) (*assembly, error) {
	comp := ^uint64(0)
	for _, d := range devs {
		comp = min(comp, uint64(d.Geometry().Size)>>9)
	}
	if bp.SizeSectors != 0 {
		comp = min(comp, bp.SizeSectors)
	}
	resync := uint64(0)
	if bp.AssumeClean {
		resync = superblock.MaxSector
	}
	roles := make([]uint16, bp.RaidDisks)
	for i := range roles {
		roles[i] = superblock.RoleFaulty
	}
	as := &assembly{supers: make([]*loadedSuper, len(devs)), roleDev: make([]int, bp.RaidDisks), journal: -1}
	for r := range as.roleDev {
		as.roleDev[r] = -1
	}
	for i, r := range bp.Roles {
		if r < 0 || r >= bp.RaidDisks || as.roleDev[r] >= 0 {
			return nil, fmt.Errorf("%w: role %d of device %d", ErrUnsupported, r, i)
		}
		as.roleDev[r] = i
		roles[r] = uint16(r)
	}
	for i, d := range devs {
		sb := &superblock.Superblock{Level: int32(bp.Level), Layout: uint32(bp.Layout),
			ChunkSize: uint32(bp.ChunkSectors), RaidDisks: uint32(bp.RaidDisks), Size: comp,
			DataSize: uint64(d.Geometry().Size) >> 9, SuperOffset: uint64(d.Geometry().Size) >> 9,
			DevNumber: uint32(bp.Roles[i]), ResyncOffset: resync, MaxDev: uint32(bp.RaidDisks), DevRoles: roles}
		if bp.Level == layout.RAID0 {
			sb.FeatureMap = superblock.FeatureRAID0Layout
		}
		if i < len(bp.WriteMostly) && bp.WriteMostly[i] {
			sb.DevFlags |= superblock.DevFlagWriteMostly
		}
		as.supers[i] = &loadedSuper{minor: -1, offset: sb.SuperOffset, sb: sb}
	}
	as.ref = as.supers[0]
	return as, nil
}

// Persistent reports whether the array has superblocks (false after
// OpenBuild: mdadm's "Persistence : Superblock is not persistent").
func (a *Array) Persistent() bool { return !a.opts.NotPersistent }

// BuiltLayout is the layout OpenBuild was given (md's mddev->layout of a
// non-persistent array, what GET_ARRAY_INFO reports).
func (a *Array) BuiltLayout() int {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.all {
		return int(int32(m.ls.sb.Layout))
	}
	return 0
}
