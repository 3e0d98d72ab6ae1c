package superblock

import (
	"errors"
	"fmt"
)

// Rule sentinels. Every *FormatError returned by Parse and CheckDevice
// wraps exactly one of them, so callers can tell the kinds of damage apart
// with errors.Is, e.g. errors.Is(err, ErrChecksum).
var (
	// ErrVersion: major_version is not 1.
	ErrVersion = errors.New("superblock: unsupported major version")
	// ErrChecksum: sb_csum does not match calc_sb_1_csum.
	ErrChecksum = errors.New("superblock: bad checksum")
	// ErrMaxDev: max_dev is larger than MaxDevs.
	ErrMaxDev = errors.New("superblock: max_dev too large")
	// ErrPadding: pad0 or pad3 is not zero ("might be a new feature").
	ErrPadding = errors.New("superblock: non-zero padding")
	// ErrFeatures: unknown feature bits, or a combination the kernel refuses.
	ErrFeatures = errors.New("superblock: unsupported feature_map")
	// ErrDataSize: data_size is too small, or does not fit on the device.
	ErrDataSize = errors.New("superblock: bad data_size")
	// ErrDataOffset: data (or the new data after a reshape) would start
	// inside the superblock.
	ErrDataOffset = errors.New("superblock: bad data_offset")
	// ErrBadBlockLog: the bad-block log is present but unusable.
	ErrBadBlockLog = errors.New("superblock: bad bad-block log description")
	// ErrJournalRole: the device has the journal role but the array has no
	// journal feature.
	ErrJournalRole = errors.New("superblock: journal role without journal feature")
	// ErrLocation: super_offset is not where the superblock is on the device.
	ErrLocation = errors.New("superblock: super_offset does not match the location")
	// ErrDeviceTooSmall: the device cannot hold a v1 superblock at all.
	ErrDeviceTooSmall = errors.New("superblock: device too small")
	// ErrOverlap: data overlaps a metadata area (bitmap, PPL, bad-block
	// log or the superblock itself). Not a kernel load check, but such a
	// member corrupts its own metadata when written.
	ErrOverlap = errors.New("superblock: data overlaps metadata")
	// ErrBitmapOffset: the internal bitmap's first sector is not on the
	// device.
	ErrBitmapOffset = errors.New("superblock: bitmap outside the device")
	// ErrTooManyDisks: raid_disks is more than a v1 superblock can give
	// roles to (MaxDevs).
	ErrTooManyDisks = errors.New("superblock: raid_disks too large")
)

// Field offsets used in error reports.
const (
	offMagic        = 0x00
	offMajorVersion = 0x04
	offFeatureMap   = 0x08
	offPad0         = 0x0C
	offLevel        = 0x48
	offRaidDisks    = 0x5C
	offBitmapOffset = 0x60
	offNewOffset    = 0x7C
	offDataOffset   = 0x80
	offDataSize     = 0x88
	offSuperOffset  = 0x90
	offBBLogSize    = 0xBA
	offBBLogOffset  = 0xBC
	offChecksum     = 0xD8
	offMaxDev       = 0xDC
	offPad3         = 0xE0
	offDevRoles     = 0x100
)

// pageSectors is PAGE_SIZE/512 on the reference platform (x86-64, 4 KiB
// pages): the kernel loads at most one page of bad-block log.
const pageSectors = 4096 / 512

// Parse decodes a v1.x superblock from b, the superblock area as read from
// the device (at least HeaderSize bytes, normally AreaSize).
//
// If b is shorter than HeaderSize it returns nil, ErrShort; if it does not
// start with Magic it returns nil, ErrBadMagic. Otherwise it always returns
// the decoded superblock, and an error joining one *FormatError for every
// rule that Linux 6.1's super_1_load / super_1_validate would refuse the
// device for, as far as the rule can be checked from these bytes alone:
//
//   - major_version must be 1 (ErrVersion);
//   - max_dev must be at most MaxDevs, and dev_roles must fit in b (ErrMaxDev,
//     or ErrShort when b is merely too short);
//   - sb_csum must equal Checksum(b) (ErrChecksum, message "%x - expected %x");
//   - data_size must be at least 10 (ErrDataSize);
//   - pad0 and every byte of pad3 must be zero (ErrPadding);
//   - for 1.1/1.2 (see Minor) data_offset, and the new data offset of an
//     active reshape with FeatureNewOffset, must not start before the end of
//     the superblock, taken as WriteSize() bytes (512-byte logical blocks)
//     (ErrDataOffset);
//   - with FeatureBadBlocks, bblog_size must be at most one 4 KiB page and
//     bblog_offset non-zero (ErrBadBlockLog);
//   - feature_map must have no unknown bit, no PPL feature together with
//     the bitmap or journal feature, not both PPL features, and no
//     FeatureRAID0Layout on a level other than raid0 (ErrFeatures);
//   - a device whose own role is RoleJournal needs FeatureJournal
//     (ErrJournalRole).
//
// The last two groups come from super_1_validate. Linux 6.1 kicks a member
// that breaks them, except the freshest member of an array being
// assembled, whose validate result analyze_sbs ignores; they are reported
// all the same. The load rules were checked against the real kernel
// (TestKernelAcceptance). Rules that need the device size are in
// CheckDevice; Validate applies both, and is what a member must pass
// before it is used. Rules that compare members with each other
// (set_uuid, events) are the caller's.
func Parse(b []byte) (*Superblock, error) {
	if len(b) < HeaderSize {
		return nil, ErrShort
	}
	if le.Uint32(b[offMagic:]) != Magic {
		return nil, ErrBadMagic
	}
	sb := decode(b)
	var errs []error
	bad := func(off int, field string, sentinel error, format string, args ...any) {
		errs = append(errs, &FormatError{Offset: int64(off), Field: field, Msg: fmt.Sprintf(format, args...), Err: sentinel})
	}

	if sb.MajorVersion != 1 {
		bad(offMajorVersion, "major_version", ErrVersion, "version %d, only 1 is supported", sb.MajorVersion)
	}
	rolesFit := true
	if sb.MaxDev > MaxDevs {
		bad(offMaxDev, "max_dev", ErrMaxDev, "%d exceeds the limit %d", sb.MaxDev, MaxDevs)
		rolesFit = false
	} else if need := sb.EncodedSize(); need > len(b) {
		bad(offMaxDev, "max_dev", ErrShort, "%d roles need %d bytes, only %d given", sb.MaxDev, need, len(b))
		rolesFit = false
	}
	if sb.FeatureMap&^FeatureAll != 0 {
		bad(offFeatureMap, "feature_map", ErrFeatures, "unknown feature bits 0x%x", sb.FeatureMap&^FeatureAll)
	}
	if rolesFit {
		if want := Checksum(b); want != sb.Checksum {
			bad(offChecksum, "sb_csum", ErrChecksum, "%x - expected %x", sb.Checksum, want)
		}
	}
	if sb.DataSize < 10 {
		bad(offDataSize, "data_size", ErrDataSize, "%d sectors, the minimum is 10", sb.DataSize)
	}
	if sb.Pad0 != 0 {
		bad(offPad0, "pad0", ErrPadding, "0x%x, must be zero", sb.Pad0)
	}
	for i, c := range sb.Pad3 {
		if c != 0 {
			bad(offPad3+i, "pad3", ErrPadding, "byte %d is 0x%02x, must be zero", i, c)
			break
		}
	}
	if sb.Minor() != 0 && sb.MaxDev <= MaxDevs {
		end := sb.SuperOffset + uint64(sb.WriteSize()/512)
		if sb.DataOffset < end {
			bad(offDataOffset, "data_offset", ErrDataOffset, "%d is inside the superblock (ends at sector %d)", sb.DataOffset, end)
		}
		if nd := sb.NewDataOffset(); nd != sb.DataOffset && nd < end {
			bad(offNewOffset, "new_offset", ErrDataOffset, "new data offset %d is inside the superblock (ends at sector %d)", nd, end)
		}
	}
	if sb.FeatureMap&FeatureBadBlocks != 0 {
		if sb.BBLogSize > pageSectors {
			bad(offBBLogSize, "bblog_size", ErrBadBlockLog, "%d sectors, the kernel loads at most %d", sb.BBLogSize, pageSectors)
		}
		if sb.BBLogOffset == 0 {
			bad(offBBLogOffset, "bblog_offset", ErrBadBlockLog, "zero with bad blocks recorded")
		}
	}
	if sb.FeatureMap&(FeaturePPL|FeatureMultiplePPLs) != 0 {
		if sb.FeatureMap&(FeatureBitmapOffset|FeatureJournal) != 0 {
			bad(offFeatureMap, "feature_map", ErrFeatures, "PPL cannot be combined with a bitmap or a journal")
		}
		if sb.FeatureMap&FeaturePPL != 0 && sb.FeatureMap&FeatureMultiplePPLs != 0 {
			bad(offFeatureMap, "feature_map", ErrFeatures, "PPL and MULTIPLE_PPLS are exclusive")
		}
	}
	if sb.FeatureMap&FeatureRAID0Layout != 0 && sb.Level != LevelRAID0 {
		bad(offFeatureMap, "feature_map", ErrFeatures, "RAID0_LAYOUT on level %d", sb.Level)
	}
	if sb.Level != LevelMultipath && uint64(sb.DevNumber) < uint64(len(sb.DevRoles)) {
		if sb.DevRoles[sb.DevNumber] == RoleJournal && sb.FeatureMap&FeatureJournal == 0 {
			bad(offDevRoles+2*int(sb.DevNumber), "dev_roles", ErrJournalRole, "device %d is a journal but the JOURNAL feature is not set", sb.DevNumber)
		}
	}
	return sb, errors.Join(errs...)
}

// NewDataOffset returns where data starts after the active reshape: the
// data_offset plus the signed new_offset when both FeatureReshapeActive and
// FeatureNewOffset are set, else data_offset. Like the kernel, the sum wraps
// around in 64 bits.
func (sb *Superblock) NewDataOffset() uint64 {
	if sb.FeatureMap&FeatureReshapeActive != 0 && sb.FeatureMap&FeatureNewOffset != 0 {
		return sb.DataOffset + uint64(int64(sb.NewOffset))
	}
	return sb.DataOffset
}
