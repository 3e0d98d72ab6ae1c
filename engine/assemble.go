package engine

import (
	"bytes"
	"errors"
	"fmt"

	"mdtool/bitmap"
	"mdtool/engine/layout"
	"mdtool/superblock"
)

// loadedSuper is a v1 superblock read from a device.
type loadedSuper struct {
	minor  int
	offset uint64 // superblock sector
	raw    []byte // the 4 KiB area as read
	sb     *superblock.Superblock
	err    error // what superblock.Validate objected to: the kernel refuses such a member
	// v090 is the 0.90 superblock read (minor 90); sb is then its v1
	// view and syncSuper writes 0.90 (meta090.go).
	v090 *superblock.SuperblockV090
	// keepDev: a multipath member, whose sb.DevNumber is md's desc_nr
	// (its place in md's list) while its superblock keeps devNumber, the
	// dev_number it was loaded with (assembleMultipath).
	keepDev   bool
	devNumber uint32
}

// ErrNoSuperblock: a device has no v1.x md superblock.
var ErrNoSuperblock = errors.New("engine: no md superblock")

// loadSuper finds the v1.x superblock of d the way mdadm's load_super1
// does (superblock.FindV1): minor < 0 tries 1.0, 1.1 and 1.2 and keeps the
// latest ctime.
func loadSuper(d Device, minor int) (*loadedSuper, error) {
	if minor == Minor090 {
		return load090(d)
	}
	sectors := uint64(d.Geometry().Size) >> 9
	v, err := superblock.FindV1(deviceReader{d}, sectors, minor)
	if errors.Is(err, superblock.ErrNotFound) {
		if minor < 0 {
			return load090(d) // any metadata: 0.90 when there is no 1.x
		}
		return nil, ErrNoSuperblock
	}
	if err != nil {
		return nil, err
	}
	// v.Err is what superblock.Validate objects to: every check the kernel
	// applies before it uses a member, including those that need the
	// device size. A member with err set is left out and never written.
	return &loadedSuper{minor: v.Minor, offset: v.Offset, raw: v.Raw, sb: v.SB, err: v.Err}, nil
}

// deviceReader reads a Device through readFull's aligned bounce buffer.
type deviceReader struct{ d Device }

func (r deviceReader) ReadAt(p []byte, off int64) (int, error) {
	if err := readFull(r.d, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readFull reads len(p) bytes at off, through an aligned bounce buffer
// when the device's logical block is larger than the request's alignment.
func readFull(d Device, p []byte, off int64) error {
	lb := int64(d.Geometry().LogicalBlock)
	if lb <= 512 || (off%lb == 0 && int64(len(p))%lb == 0) {
		_, err := d.ReadAt(p, off)
		return err
	}
	start := off / lb * lb
	end := (off + int64(len(p)) + lb - 1) / lb * lb
	b := getBuf(int(end - start))
	defer putBuf(b)
	if _, err := d.ReadAt(b.b, start); err != nil {
		return err
	}
	copy(p, b.b[off-start:])
	return nil
}

// Member states.
type MemberState uint8

const (
	// InSync: an active member with all data valid.
	InSync MemberState = iota
	// Recovering: an active member being rebuilt; data below its recovery
	// offset is valid.
	Recovering
	// Spare: a member with no role.
	Spare
	// Faulty: a member that failed; it gets no I/O.
	Faulty
	// Missing: a role without a device.
	Missing
	// Journal: the raid4/5/6 write journal (r5l log); no role, no data.
	Journal
)

func (s MemberState) String() string {
	switch s {
	case InSync:
		return "in_sync"
	case Recovering:
		return "recovering"
	case Spare:
		return "spare"
	case Faulty:
		return "faulty"
	case Missing:
		return "missing"
	case Journal:
		return "journal"
	}
	return fmt.Sprintf("MemberState(%d)", int(s))
}

// ErrMismatch: the devices do not belong to one array.
var ErrMismatch = errors.New("engine: devices are not members of the same array")

// ErrInvalidSuper: a device's superblock fails the checks the kernel
// applies before using a member (superblock.Validate).
var ErrInvalidSuper = errors.New("engine: invalid superblock")

// ErrUnsupported: the array uses a feature the engine cannot run.
var ErrUnsupported = errors.New("engine: unsupported array")

// assembly is the outcome of matching the superblocks.
type assembly struct {
	ref     *loadedSuper
	supers  []*loadedSuper // per device
	roleDev []int          // per role: device index or -1
	spares  []int          // device indexes
	stale   []int          // device indexes left out (too old, faulty, duplicate, refused)
	refused []int          // device indexes whose superblock failed validation
	repl    map[int]int    // role -> device index of its replacement
	journal int            // device index of the write journal, -1: none
}

// assemble decides, like mdadm --assemble plus the kernel's
// super_1_validate, which device plays which role.
func assemble(devs []Device, minor int) (*assembly, error) {
	if len(devs) == 0 {
		return nil, errors.New("engine: no devices")
	}
	as := &assembly{supers: make([]*loadedSuper, len(devs)), journal: -1}
	for i, d := range devs {
		ls, err := loadSuper(d, minor)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", i, err)
		}
		as.supers[i] = ls
		if ls.err != nil {
			// super_1_load refuses the member (bad checksum, data that
			// does not fit, ...): it is left out and never written.
			as.stale = append(as.stale, i)
			as.refused = append(as.refused, i)
			continue
		}
		if as.ref == nil || ls.sb.Events > as.ref.sb.Events {
			as.ref = ls
		}
	}
	if as.ref == nil {
		return nil, fmt.Errorf("%w: no device has a valid superblock: device 0: %v", ErrInvalidSuper, as.supers[0].err)
	}
	ref := as.ref.sb
	for i, ls := range as.supers {
		if ls.err != nil {
			continue
		}
		if !bytes.Equal(ls.sb.SetUUID[:], ref.SetUUID[:]) {
			return nil, fmt.Errorf("%w: device %d has array UUID %s, expected %s", ErrMismatch, i,
				superblock.FormatUUID(ls.sb.SetUUID), superblock.FormatUUID(ref.SetUUID))
		}
	}
	if ref.FeatureMap&(superblock.FeaturePPL|superblock.FeatureMultiplePPLs|superblock.FeatureClustered) != 0 {
		return nil, fmt.Errorf("%w: feature map 0x%x (PPL or cluster)", ErrUnsupported, ref.FeatureMap)
	}
	if ref.FeatureMap&superblock.FeatureJournal != 0 {
		if l := layout.Level(ref.Level); l != layout.RAID4 && l != layout.RAID5 && l != layout.RAID6 {
			return nil, fmt.Errorf("%w: a write journal on %v", ErrUnsupported, l)
		}
		if ref.FeatureMap&superblock.FeatureReshapeActive != 0 {
			return nil, fmt.Errorf("%w: a reshape with a write journal", ErrUnsupported)
		}
	}
	if layout.Level(ref.Level) == layout.Multipath {
		assembleMultipath(as)
		return as, nil
	}
	// During a reshape that removes devices, the roles above the new
	// raid_disks still hold data (StateSlots).
	n := int(ref.StateSlots())
	as.roleDev = make([]int, n)
	for r := range as.roleDev {
		as.roleDev[r] = -1
	}
	for i, ls := range as.supers {
		if ls.err != nil {
			continue
		}
		sb := ls.sb
		own := sb.Role()
		refRole := uint16(superblock.RoleSpare)
		if uint64(sb.DevNumber) < uint64(len(ref.DevRoles)) {
			refRole = ref.DevRoles[sb.DevNumber]
		}
		switch {
		case own == superblock.RoleSpare && refRole == superblock.RoleSpare:
			as.spares = append(as.spares, i)
			continue
		case own == superblock.RoleJournal && ref.FeatureMap&superblock.FeatureJournal != 0 &&
			refRole == superblock.RoleJournal && sb.Events+1 >= ref.Events:
			// super_1_validate: a journal no more than one event behind
			if j := as.journal; j >= 0 {
				if as.supers[j].sb.Events >= sb.Events {
					as.stale = append(as.stale, i)
					continue
				}
				as.stale = append(as.stale, j)
			}
			as.journal = i
			continue
		case !superblock.ActiveRole(own) || int(own) >= n:
			as.stale = append(as.stale, i)
			continue
		case sb.Events+1 < ref.Events:
			// kernel: "Insist on good event counter while assembling"
			as.stale = append(as.stale, i)
			continue
		case refRole != own && ls != as.ref:
			// The freshest superblock says this device is faulty, a spare
			// or in another role: mdadm leaves it out.
			as.stale = append(as.stale, i)
			continue
		}
		if j := as.roleDev[own]; j >= 0 {
			o := as.supers[j].sb
			// A replacement being rebuilt next to the member it
			// replaces (both current): md resumes the replacement.
			isRepl := func(x *superblock.Superblock) bool {
				return x.FeatureMap&superblock.FeatureReplacement != 0 && x.FeatureMap&superblock.FeatureRecoveryOffset != 0
			}
			if o.Events == sb.Events && isRepl(sb) != isRepl(o) {
				if as.repl == nil {
					as.repl = make(map[int]int)
				}
				if isRepl(sb) {
					as.repl[int(own)] = i
					continue
				}
				as.repl[int(own)] = j
				as.roleDev[own] = i
				continue
			}
			// Two devices claim a role: keep the fresher, prefer a
			// non-replacement.
			if o.Events > sb.Events || (o.Events == sb.Events && sb.FeatureMap&superblock.FeatureReplacement != 0) {
				as.stale = append(as.stale, i)
				continue
			}
			as.stale = append(as.stale, j)
		}
		as.roleDev[own] = i
	}
	return as, nil
}

// readBitmap reads the bitmap header and bits from a member.
func readBitmap(d Device, ls *loadedSuper) (*bitmap.Header, []byte, error) {
	off := (int64(ls.offset) + int64(ls.sb.BitmapOffset)) * 512
	head := make([]byte, 512)
	if err := readFull(d, head, off); err != nil {
		return nil, nil, err
	}
	h, err := bitmap.Parse(head)
	if h == nil {
		return nil, nil, err
	}
	if err != nil {
		return h, nil, err
	}
	n := int64(h.Bytes())
	area := make([]byte, (n+4095)&^4095)
	if off+int64(len(area)) > d.Geometry().Size {
		area = area[:d.Geometry().Size-off]
	}
	if err := readFull(d, area, off); err != nil {
		return h, nil, err
	}
	return h, area, nil
}
