package superblock

import (
	"errors"
	"fmt"
)

// MinDevSectors is the smallest device, in sectors, that mdadm accepts for
// v1.x metadata (load_super1 and write_init_super1 refuse fewer than 24).
const MinDevSectors = 24

// Offset returns the sector at which a 1.minor superblock lives on a device
// of devSectors 512-byte sectors, as mdadm and the kernel compute it:
//
//	1.0: (devSectors - 16) &^ 7   (8 to 12 KiB before the end, 4 KiB aligned)
//	1.1: 0
//	1.2: 8                        (4 KiB from the start)
//
// It fails for a minor other than 0, 1, 2 and, wrapping ErrDeviceTooSmall,
// for a device smaller than MinDevSectors.
func Offset(minor int, devSectors uint64) (uint64, error) {
	if minor < 0 || minor > 2 {
		return 0, fmt.Errorf("superblock: no metadata format 1.%d", minor)
	}
	if devSectors < MinDevSectors {
		return 0, fmt.Errorf("%w: %d sectors, v1 metadata needs at least %d", ErrDeviceTooSmall, devSectors, MinDevSectors)
	}
	switch minor {
	case 0:
		return (devSectors - 16) &^ 7, nil
	case 1:
		return 0, nil
	default:
		return 8, nil
	}
}

// Minor returns the minor version the superblock's location implies, the
// way mdadm --examine decides it: 1 if super_offset <= 4, 2 if
// super_offset <= 8, else 0. The minor version is not stored on disk.
func (sb *Superblock) Minor() int {
	switch {
	case sb.SuperOffset <= 4:
		return 1
	case sb.SuperOffset <= 8:
		return 2
	default:
		return 0
	}
}

// area is a metadata region in absolute sectors, [start, end).
type area struct {
	name       string
	field      string
	off        int
	start, end int64
}

// metadataAreas lists the regions the superblock says metadata occupies:
// the superblock itself (WriteSize bytes), the bitmap (at least its first
// sector; its length is in the bitmap superblock), the PPL and the
// bad-block log.
func (sb *Superblock) metadataAreas() []area {
	base := int64(sb.SuperOffset)
	if base < 0 { // absurd super_offset; nothing sensible to compare
		return nil
	}
	as := []area{{"superblock", "super_offset", offSuperOffset, base, base + int64(sb.WriteSize()/512)}}
	switch {
	case sb.FeatureMap&FeatureBitmapOffset != 0:
		s := base + int64(sb.BitmapOffset)
		as = append(as, area{"bitmap", "bitmap_offset", offBitmapOffset, s, s + 1})
	case sb.FeatureMap&(FeaturePPL|FeatureMultiplePPLs) != 0:
		s := base + int64(sb.PPLOffset())
		as = append(as, area{"PPL", "ppl.offset", offBitmapOffset, s, s + int64(sb.PPLSize())})
	}
	if sb.BBLogSize != 0 && sb.BBLogOffset != 0 {
		s := base + int64(sb.BBLogOffset)
		as = append(as, area{"bad-block log", "bblog_offset", offBBLogOffset, s, s + int64(sb.BBLogSize)})
	}
	return as
}

// CheckDevice checks the rules that need the size of the member device, in
// sectors. It returns nil or an errors.Join of *FormatError values (or, for
// a device below MinDevSectors, an error wrapping ErrDeviceTooSmall):
//
//   - super_offset must be the location Offset(sb.Minor(), devSectors)
//     (ErrLocation; mdadm and the kernel look only there);
//   - the data must fit on the device: for 1.1/1.2 data_offset+data_size
//     <= devSectors, for 1.0 data_size <= super_offset, as super_1_load
//     demands (ErrDataOffset, ErrDataSize);
//   - the data range [data_offset, data_offset+data_size) must not overlap
//     the superblock, the bitmap's first sector, the PPL or the bad-block
//     log (ErrOverlap). The kernel does not check this when loading, but
//     mdadm never lays a member out that way;
//   - with FeatureBitmapOffset, the bitmap's first sector (super_offset +
//     bitmap_offset) must be on the device (ErrBitmapOffset).
func (sb *Superblock) CheckDevice(devSectors uint64) error {
	minor := sb.Minor()
	loc, err := Offset(minor, devSectors)
	if err != nil {
		return err
	}
	var errs []error
	bad := func(off int, field string, sentinel error, format string, args ...any) {
		errs = append(errs, &FormatError{Offset: int64(off), Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
	}
	if sb.SuperOffset != loc {
		bad(offSuperOffset, "super_offset", ErrLocation, "%d, but a 1.%d superblock on a %d-sector device is at sector %d",
			sb.SuperOffset, minor, devSectors, loc)
	}
	if minor != 0 {
		if sb.DataOffset > devSectors {
			bad(offDataOffset, "data_offset", ErrDataOffset, "%d is beyond the end of the %d-sector device", sb.DataOffset, devSectors)
		} else if sb.DataSize > devSectors-sb.DataOffset {
			bad(offDataSize, "data_size", ErrDataSize, "%d sectors at offset %d do not fit on the %d-sector device",
				sb.DataSize, sb.DataOffset, devSectors)
		}
	} else if sb.DataSize > sb.SuperOffset {
		bad(offDataSize, "data_size", ErrDataSize, "%d sectors, but the superblock is at sector %d", sb.DataSize, sb.SuperOffset)
	}
	if sb.FeatureMap&FeatureBitmapOffset != 0 {
		if s := int64(sb.SuperOffset) + int64(sb.BitmapOffset); sb.SuperOffset >= 1<<62 || s < 0 || uint64(s) >= devSectors {
			bad(offBitmapOffset, "bitmap_offset", ErrBitmapOffset, "%d puts the bitmap at sector %d, outside the %d-sector device",
				sb.BitmapOffset, s, devSectors)
		}
	}
	if sb.DataSize > 0 && sb.DataOffset < 1<<62 && sb.DataSize < 1<<62 {
		ds, de := int64(sb.DataOffset), int64(sb.DataOffset+sb.DataSize)
		for _, a := range sb.metadataAreas() {
			if a.start < de && ds < a.end {
				bad(a.off, a.field, ErrOverlap, "the %s (sectors %d-%d) lies inside the data (sectors %d-%d)",
					a.name, a.start, a.end-1, ds, de-1)
			}
		}
	}
	return errors.Join(errs...)
}

// Validate decodes the superblock area b of a device of devSectors
// sectors and applies every check a member must pass before it is used:
// Parse's rules (Linux 6.1 super_1_load and super_1_validate on the bytes)
// and CheckDevice's (the ones that need the device size). It returns nil
// and ErrShort or ErrBadMagic when b holds no superblock; otherwise the
// decoded superblock (also when damaged, for printing) and nil or the
// errors.Join of every *FormatError found. Rules that compare members with
// each other (set_uuid, level, chunk, events) are the caller's. Beyond the
// kernel's rules, raid_disks above MaxDevs is refused (ErrTooManyDisks): no
// superblock can give that many devices a role, and sizing anything by
// it would allocate gigabytes.
func Validate(b []byte, devSectors uint64) (*Superblock, error) {
	sb, err := Parse(b)
	if sb == nil {
		return nil, err
	}
	if derr := sb.CheckDevice(devSectors); derr != nil {
		err = errors.Join(err, derr)
	}
	if sb.RaidDisks > MaxDevs {
		err = errors.Join(err, &FormatError{Offset: offRaidDisks, Field: "raid_disks", Err: ErrTooManyDisks,
			Msg: fmt.Sprintf("%d, a v1 superblock has roles for at most %d devices", sb.RaidDisks, MaxDevs)})
	}
	return sb, err
}

// FirstProblem returns the first *FormatError in err (as errors.As finds
// it), or nil.
func FirstProblem(err error) *FormatError {
	var fe *FormatError
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}
