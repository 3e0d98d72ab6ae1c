// Package plan computes, without doing any I/O, exactly what
// `mdadm --create` (mdadm 4.2) writes to each member for v1.0, v1.1 and
// v1.2 metadata: every superblock field, the internal bitmap area, and
// where each goes, plus the array-level facts (sizes, offsets, layout,
// whether the kernel will resync or rebuild).
//
// The rules follow mdadm 4.2's Create.c and super1.c (validate_geometry1,
// init_super1, add_to_super1, add_internal_bitmap1, write_init_super1,
// store_super1, write_bitmap1); array sizes follow the Linux 6.1 md
// personalities. Refusals are returned as *Error worded as mdadm words them.
//
// Things mdadm does around the writes that the engine must do itself:
// erase any md superblock (of any version) already on a member before
// writing (mdadm's Kill loop in write_init_super1), and write in units of
// the device's logical block size (read-modify-write for 4 KiB-sector
// devices, as mdadm's awrite does).
package plan

import (
	"crypto/rand"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"time"

	"mdtool/bitmap"
	"mdtool/superblock"
)

// Device is one entry of the device list, in command-line order (raid
// devices, then spares).
type Device struct {
	Path              string
	Missing           bool   // the word "missing": an empty slot
	Sectors           uint64 // device size in 512-byte sectors
	LogicalBlockSize  uint32 // bytes; 0 means 512
	PhysicalBlockSize uint32 // bytes; informational
}

// Options are the create parameters, as given on mdadm's command line.
type Options struct {
	// MDDevice is the array device as named on the command line
	// (/dev/md0, /dev/md/NAME or NAME); the array name is derived from
	// it when Name is empty.
	MDDevice string
	// Metadata is -e: "1.0", "1.1", "1.2" (also "1.00", "1.01", "1.02"),
	// "1" or "default" (both 1.2), "" = not given (1.2).
	Metadata string
	// Level is --level in any form mdadm accepts ("raid5", "5", "mirror").
	Level string
	// Layout is --layout ("" = default for the level).
	Layout       string
	RaidDevices  int
	SpareDevices int
	// ChunkKiB is --chunk in KiB; 0 = not given (512 for striped levels).
	ChunkKiB uint64
	// SizeKiB is --size in KiB; 0 = not given (largest possible).
	SizeKiB uint64
	// DataOffset is --data-offset in sectors; 0 = not given.
	DataOffset uint64
	// Bitmap is --bitmap: "internal", "none", or "" (not given: mdadm 4.2
	// adds an internal bitmap by itself when the component size exceeds
	// 100 GiB on levels with redundancy).
	Bitmap string
	// BitmapChunk is --bitmap-chunk in bytes; 0 = not given.
	BitmapChunk uint64
	// Name is --name; "" = derive from MDDevice.
	Name string
	// Homehost is --homehost: "" or "<system>" = SystemHostname,
	// "<none>" = none, anything else (e.g. "any") literally.
	Homehost       string
	SystemHostname string
	// UUID is --uuid as the 16 set_uuid bytes in printed order; nil = random.
	UUID        *[16]byte
	AssumeClean bool
	Force       bool
	// Now is the creation time; zero = time.Now().
	Now time.Time
	// Rand supplies the random UUIDs (16 bytes each: array UUID first if
	// not given, then one device UUID per member in write order);
	// nil = crypto/rand.
	Rand    io.Reader
	Devices []Device
}

// Write is one write of Data at byte Offset of a member device.
type Write struct {
	Offset int64
	Data   []byte
}

// Member is what gets written to one non-missing device.
type Member struct {
	Device    int    // index in Options.Devices
	Path      string // Options.Devices[Device].Path
	DevNumber uint32 // slot in dev_roles
	// Role is dev_roles[DevNumber]: the raid slot, or superblock.RoleSpare.
	Role       uint16
	Superblock *superblock.Superblock // checksum filled in
	// SuperOffset is the byte offset of the superblock; SuperBytes the
	// bytes mdadm writes there (256+2*max_dev rounded up to 512).
	SuperOffset int64
	SuperBytes  []byte
	// BitmapOffset/BitmapBytes: the whole bitmap area (header, then
	// 0xff bits, padded to 4 KiB) when there is an internal bitmap.
	BitmapOffset int64
	BitmapBytes  []byte
	// Writes lists the writes in mdadm's order (superblock, then bitmap).
	Writes []Write
}

// Result is the complete plan.
type Result struct {
	Metadata          string // "1.0", "1.1" or "1.2"
	Minor             int    // 0, 1 or 2
	DefaultedMetadata bool   // -e not given ("Defaulting to version 1.2 metadata")

	Level     int
	LevelName string
	Layout    uint32
	// LayoutName is the --examine text for the layout ("" if the level
	// has none).
	LayoutName string
	ChunkKiB   uint64 // 0 when the level has no chunk (raid1, plain linear)

	RaidDisks  int
	SpareDisks int // spares in the superblocks, incl. a recovery spare

	// ComponentSectors is the superblock's size field (0 for raid0 and
	// linear unless --size was given).
	ComponentSectors uint64
	// KernelComponentSectors is the component size the md driver uses
	// and writes back into the superblocks once it runs the array. It
	// differs from ComponentSectors only for raid10 layouts whose chunk
	// count does not divide evenly (e.g. f2 on 3 devices with an odd
	// number of chunks), where the driver trims it.
	KernelComponentSectors uint64
	// ArraySizeKiB is the size the md driver gives the array.
	ArraySizeKiB uint64
	// DataOffset is the data offset chosen for the array (sectors):
	// computed from the first device, or --data-offset.
	DataOffset uint64

	Bitmap         bool   // internal write-intent bitmap
	AutoBitmap     bool   // added by mdadm itself (array > 100 GiB)
	BitmapChunk    uint64 // bytes
	BitmapSyncSize uint64 // sectors covered (array size for raid10)
	BitmapOffset   int32  // sectors from the superblock

	// ResyncOffset is the superblocks' resync_offset: superblock.MaxSector
	// (clean) or 0 (the kernel starts a full resync).
	ResyncOffset uint64
	NeedsResync  bool
	// Degraded: some raid slot has no active member at start.
	Degraded     bool
	MissingSlots []int // raid slots without an active member
	// RecoverySpare is the Options.Devices index of the device mdadm
	// deliberately adds as a spare so that the kernel rebuilds it into
	// RecoverySlot (raid4/5 without --force/--assume-clean; raid6 created
	// with one missing device); -1 if none.
	RecoverySpare int
	RecoverySlot  int

	Name     string // set_name as stored
	Homehost string // homehost used ("" = none)
	UUID     [16]byte
	CTime    superblock.Time

	Members []Member // non-missing devices, in the order mdadm writes them
	// Warnings are the notes for which mdadm 4.2 asks "Continue creating
	// array?" (unless --run).
	Warnings []string
}

// maxDevs is the 1.x limit on dev_roles entries.
const maxDevs = superblock.MaxDevs

func parseMetadata(s string) (minor int, defaulted bool, err error) {
	if s == "" {
		return 2, true, nil
	}
	t := strings.TrimLeft(s, "0")
	switch t {
	case "1.0", "1.00":
		return 0, false, nil
	case "1.1", "1.01":
		return 1, false, nil
	case "1.2", "1.02", "default", "1":
		return 2, false, nil
	}
	switch t {
	case ".90", ".9", "":
		return 0, false, errorf(2, "0.90 metadata is not supported; use 1.0, 1.1 or 1.2")
	case "ddf", "imsm":
		return 0, false, errorf(2, "%s metadata is not supported; use 1.0, 1.1 or 1.2", s)
	}
	return 0, false, errorf(2, "unrecognised metadata identifier: %s", s)
}

// chooseBmSpace is mdadm's choose_bm_space.
func chooseBmSpace(devSectors uint64) uint64 { return bitmap.ChooseSpace(devSectors) }

// defaultDataOffset is validate_geometry1's default for 1.1/1.2: room for
// the superblock and a bitmap, plus reshape headroom of about 0.1% of the
// device (at most 128 MiB, at least two chunks), rounded up to 1 MiB.
func defaultDataOffset(devSectors, chunkKiB uint64) uint64 {
	bmspace := chooseBmSpace(devSectors)
	headroom := uint64(128 * 1024 * 2)
	for headroom<<10 > devSectors && (chunkKiB == 0 || headroom/2 >= chunkKiB*2*2) {
		headroom >>= 1
	}
	return roundUp(12*2+bmspace+headroom, 2*1024)
}

func roundUp(n, m uint64) uint64 { return (n + m - 1) / m * m }

// Plan computes what mdadm --create would write. It never does I/O and
// returns every refusal before anything could be written.
func Plan(o Options) (*Result, error) {
	r := &Result{RecoverySpare: -1, RecoverySlot: -1}

	// ---- command-line checks (mdadm.c) ----
	minor, defaulted, err := parseMetadata(o.Metadata)
	if err != nil {
		return nil, err
	}
	r.Minor, r.DefaultedMetadata = minor, defaulted
	r.Metadata = fmt.Sprintf("1.%d", minor)

	if o.Level == "" {
		return nil, errorf(1, "a RAID level is needed to create an array.")
	}
	level, err := ParseLevel(o.Level)
	if err != nil {
		return nil, err
	}
	switch level {
	case LevelMultipath, LevelFaulty:
		return nil, errorf(2, "level %s is not supported by mdtool (removed from Linux md)", o.Level)
	case LevelContainer:
		return nil, errorf(1, "1.x metadata does not support containers")
	}
	r.Level = level
	r.LevelName, _ = LevelName(level)

	layoutGiven := o.Layout != ""
	var layout uint32
	if layoutGiven {
		if layout, err = ParseLayout(level, o.Layout); err != nil {
			return nil, err
		}
	}
	if o.ChunkKiB != 0 && o.ChunkKiB < 4 {
		return nil, errorf(2, "invalid chunk/rounding value: %dK", o.ChunkKiB)
	}
	if o.SizeKiB != 0 && o.SizeKiB < 4 {
		return nil, errorf(2, "invalid size: %dK", o.SizeKiB)
	}
	if len(o.Name) > 32 {
		return nil, errorf(2, "name '%s' is too long, 32 chars max.", o.Name)
	}
	switch {
	case o.Bitmap == "" || o.Bitmap == "internal" || o.Bitmap == "none":
	case o.Bitmap == "clustered":
		return nil, errorf(2, "clustered bitmaps are not supported")
	case strings.Contains(o.Bitmap, "/"):
		return nil, errorf(2, "external bitmap files are not supported; use --bitmap=internal")
	default:
		return nil, &Error{Status: 2, Lines: []string{
			"bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'",
			fmt.Sprintf("       not '%s'", o.Bitmap)}}
	}
	if o.DataOffset != 0 && minor == 0 {
		// mdadm 4.2 stores it but still sizes the data up to the end
		// metadata, so the data would run over the superblock.
		return nil, errorf(1, "--data-offset cannot be used with 1.0 metadata (the data would overlap the superblock)")
	}
	if o.BitmapChunk != 0 && (o.BitmapChunk < 512 || o.BitmapChunk&(o.BitmapChunk-1) != 0) {
		return nil, errorf(2, "invalid bitmap chunksize: %d", o.BitmapChunk)
	}
	if o.SpareDevices < 0 {
		return nil, errorf(2, "invalid number of spare-devices: %d", o.SpareDevices)
	}
	if o.RaidDevices < 0 {
		return nil, errorf(2, "invalid number of raid devices: %d", o.RaidDevices)
	}
	if o.SpareDevices > 0 && (level == LevelRAID0 || level == LevelLinear) {
		return nil, errorf(2, "raid level %s is incompatible with spare-devices setting.", o.Level)
	}
	if o.RaidDevices == 1 && !o.Force {
		return nil, &Error{Status: 2, Lines: []string{
			"'1' is an unusual number of drives for an array, so it is probably",
			"     a mistake.  If you really mean it you will need to specify --force before",
			"     setting the number of drives."}}
	}
	if o.RaidDevices == 0 {
		return nil, errorf(1, "no raid-devices specified.")
	}
	homehost := ResolveHomehost(o.Homehost, o.Homehost != "", nil, func() (string, error) { return o.SystemHostname, nil })
	r.Homehost = homehost

	// ---- Create() ----
	raid := o.RaidDevices
	spares := o.SpareDevices
	if raid < 4 && level == LevelRAID6 {
		return nil, errorf(1, "at least 4 raid-devices needed for level 6")
	}
	if raid > 256 && level == LevelRAID6 {
		return nil, errorf(1, "no more than 256 raid-devices supported for level 6")
	}
	if raid < 2 && level >= LevelRAID4 {
		return nil, errorf(1, "at least 2 raid-devices needed for level %d", level)
	}
	if level <= 0 && spares > 0 {
		return nil, errorf(1, "This level does not support spare devices")
	}
	subdevs := len(o.Devices)
	if subdevs > raid+spares {
		return nil, errorf(1, "You have listed more devices (%d) than are in the array(%d)!", subdevs, raid+spares)
	}
	if subdevs < raid+spares {
		return nil, errorf(1, "You haven't given enough devices (real or missing) to create this array")
	}
	if o.Bitmap != "" && level <= 0 {
		return nil, errorf(1, "bitmaps not meaningful with level %s", r.LevelName)
	}
	if !layoutGiven {
		layout = DefaultLayout(level)
	}
	if level == LevelRAID10 {
		near, far, _ := RAID10Copies(layout)
		if near*far > raid {
			return nil, errorf(1, "that layout requires at least %d devices", near*far)
		}
		if near*far < 2 {
			// mdadm accepts this; the md driver refuses to run it.
			return nil, errorf(1, "raid10 layout %s has no redundancy; the md driver needs at least 2 copies", o.Layout)
		}
	}
	r.Layout = layout
	r.LayoutName = LayoutName(level, layout)

	chunk := o.ChunkKiB
	switch level {
	case LevelRAID0, LevelRAID4, LevelRAID5, LevelRAID6, LevelRAID10:
		if chunk == 0 {
			chunk = DefaultChunkKiB
		}
		if level != LevelRAID0 && chunk&(chunk-1) != 0 {
			// mdadm passes it on; the md driver refuses to run the array.
			return nil, errorf(1, "chunk size %dK is not a power of 2, which %s requires", chunk, r.LevelName)
		}
	case LevelRAID1:
		if chunk != 0 {
			return nil, errorf(1, "specifying chunk size is forbidden for this level")
		}
	}
	r.ChunkKiB = chunk

	size := o.SizeKiB
	if size != 0 && chunk != 0 {
		size &^= chunk - 1 // mdadm masks (exact for powers of two)
		if size == 0 {
			return nil, errorf(1, "Size cannot be smaller than chunk.")
		}
	}

	// Duplicate devices: mdadm fails on the second exclusive open.
	seen := map[string]int{}
	for i, d := range o.Devices {
		if d.Missing {
			continue
		}
		if j, ok := seen[d.Path]; ok {
			return nil, errorf(1, "device %s is listed more than once (positions %d and %d)", d.Path, j+1, i+1)
		}
		seen[d.Path] = i
	}

	// ---- per-device geometry (validate_geometry1) ----
	var (
		haveDefaultOffset bool
		stDataOffset      uint64
		fail              []string
		minsize, maxsize  uint64
		mindisc, maxdisc  = -1, -1
		firstMissing      = subdevs * 2
		secondMissing     = subdevs * 2
		missingDisks      int
		working, active   int
		warnings          []string
		bootNote          bool
	)
	for dnum, d := range o.Devices {
		if d.Missing {
			if firstMissing > dnum {
				firstMissing = dnum
			}
			if secondMissing > dnum && dnum > firstMissing {
				secondMissing = dnum
			}
			missingDisks++
			continue
		}
		working++
		if dnum < raid {
			active++
		}
		devsize := d.Sectors
		bmspace := chooseBmSpace(devsize)
		dataOffset := o.DataOffset
		if dataOffset == 0 {
			if haveDefaultOffset {
				dataOffset = stDataOffset
			} else if minor != 0 {
				dataOffset = defaultDataOffset(devsize, chunk)
			}
		}
		if !haveDefaultOffset {
			haveDefaultOffset, stDataOffset = true, dataOffset
		}
		var freesize uint64
		tooSmall := false
		if minor == 0 {
			devsize &^= 7
			overhead := 8*2 + 8 + bmspace
			if devsize < overhead {
				tooSmall = true
			} else {
				freesize = devsize - overhead
			}
		} else {
			if devsize < dataOffset {
				tooSmall = true
			} else {
				freesize = devsize - dataOffset
			}
		}
		if tooSmall {
			fail = append(fail,
				fmt.Sprintf("device %s is too small (%dK) for required metadata!", d.Path, devsize>>1),
				fmt.Sprintf("%s is not suitable for this array.", d.Path))
			continue
		}
		freesize /= 2
		if chunk != 0 {
			freesize &^= chunk - 1
		}
		if freesize == 0 {
			fail = append(fail, fmt.Sprintf("no free space left on %s", d.Path))
			continue
		}
		if size != 0 && freesize < size {
			fail = append(fail, fmt.Sprintf("%s is smaller than given size. %dK < %dK + metadata", d.Path, freesize, size))
			continue
		}
		if maxdisc < 0 || freesize > maxsize {
			maxdisc, maxsize = dnum, freesize
		}
		if mindisc < 0 || freesize < minsize {
			mindisc, minsize = dnum, freesize
		}
		if defaulted && minor >= 1 && level == LevelRAID1 && !bootNote {
			bootNote = true
			warnings = append(warnings, "Note: this array has metadata at the start and\n"+
				"    may not be suitable as a boot device.  If you plan to\n"+
				"    store '/boot' on this device please ensure that\n"+
				"    your boot-loader understands md/v1.x metadata, or use\n"+
				"    --metadata=0.90")
		}
	}
	if missingDisks == subdevs {
		return nil, errorf(1, "Subdevs can't be all missing")
	}
	if raid+spares > maxDevs {
		return nil, errorf(1, "Too many devices: 1.x metadata only supports %d", maxDevs)
	}
	if len(fail) > 0 {
		return nil, &Error{Status: 1, Lines: append(fail, "create aborted")}
	}
	if size == 0 && level > 0 {
		size = minsize
		if level == LevelRAID1 {
			size &^= 64 - 1
		}
	}
	r.DataOffset = stDataOffset

	wantBitmap := o.Bitmap == "internal"
	if o.Bitmap == "" && level >= 1 && size > 100*1024*1024 {
		wantBitmap, r.AutoBitmap = true, true
	}
	if level > 0 && (maxsize-size)*100 > maxsize {
		warnings = append(warnings, fmt.Sprintf("largest drive (%s) exceeds size (%dK) by more than 1%%",
			o.Devices[maxdisc].Path, size))
	}
	r.Warnings = warnings

	// ---- raid4/5/6 initial recovery instead of resync ----
	insertPoint := subdevs * 2
	if !o.AssumeClean && !o.Force && firstMissing >= raid && (level == LevelRAID4 || level == LevelRAID5) {
		insertPoint = raid - 1
		spares++
		active--
		missingDisks++
	}
	if !o.AssumeClean && !o.Force && firstMissing < raid && secondMissing >= raid && level == LevelRAID6 {
		insertPoint = raid - 1
		if insertPoint == firstMissing {
			insertPoint--
		}
		spares++
		active--
		missingDisks++
	}
	if level <= 0 && firstMissing < subdevs*2 {
		return nil, errorf(1, "This level does not support missing devices")
	}

	// ---- name ----
	name := o.Name
	if name == "" {
		if o.MDDevice == "" {
			return nil, errorf(1, "no md device or --name given")
		}
		if name, err = ArrayName(o.MDDevice); err != nil {
			return nil, err
		}
	} else if o.MDDevice != "" {
		if _, err := chosenName(o.MDDevice); err != nil {
			return nil, err
		}
	}
	if err := CheckName("name", name); err != nil {
		return nil, err
	}
	if MapUnsafe(o.MDDevice, '_') != o.MDDevice {
		return nil, errorf(2, "invalid md device '%s': it contains a control character or an unprintable byte.", EscapeName(o.MDDevice))
	}
	if StoredName(name, homehost) != StoredName(name, "") {
		if err := CheckName("homehost", homehost); err != nil {
			return nil, err
		}
	}

	// ---- init_super1 ----
	clean := ((level == LevelRAID4 || level == LevelRAID5) && (insertPoint < raid || firstMissing < raid)) ||
		(level == LevelRAID6 && (insertPoint < raid || secondMissing < raid)) ||
		level <= 0 || o.AssumeClean
	rnd := o.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	sb := &superblock.Superblock{
		Magic:        superblock.Magic,
		MajorVersion: 1,
		Level:        int32(level),
		Layout:       layout,
		Size:         size * 2,
		ChunkSize:    uint32(chunk * 1024 >> 9),
		RaidDisks:    uint32(raid),
		DataOffset:   stDataOffset,
		Events:       1,
	}
	if o.UUID != nil {
		sb.SetUUID = *o.UUID
	} else if _, err := io.ReadFull(rnd, sb.SetUUID[:]); err != nil {
		return nil, fmt.Errorf("random uuid: %w", err)
	}
	sb.SetNameString(StoredName(name, homehost))
	sb.CTime = superblock.MakeTime(now.Unix(), 0)
	sb.UTime = sb.CTime
	if clean {
		sb.ResyncOffset = superblock.MaxSector
	}
	sbSpares := working - active
	if raid+sbSpares > maxDevs {
		return nil, errorf(1, "too many devices requested: %d+%d > %d", raid, sbSpares, maxDevs)
	}
	sbsize := roundUp(superblock.HeaderSize+2*uint64(raid+sbSpares), 512)
	sb.MaxDev = uint32((sbsize - superblock.HeaderSize) / 2)
	roles := make([]uint16, maxDevs)
	for i := range roles {
		roles[i] = superblock.RoleSpare
	}

	r.RaidDisks = raid
	r.SpareDisks = spares
	r.ComponentSectors = sb.Size
	r.ResyncOffset = sb.ResyncOffset
	r.NeedsResync = !clean
	r.Name = sb.Name()
	r.UUID = sb.SetUUID
	r.CTime = sb.CTime

	// ---- pass 1: slots, numbers, roles (Create's device loop) ----
	type added struct {
		dev      int
		number   int
		raidDisk int
	}
	var order []added
	{
		dnum, rdn := 0, 0
		moved := -1
		i := 0
		for i >= 0 {
			cur := i
			next := func() {
				if cur+1 < len(o.Devices) {
					i = cur + 1
				} else {
					i = moved
				}
				dnum++
			}
			if dnum == insertPoint {
				rdn++
				moved = cur
				next()
				continue
			}
			if o.Devices[cur].Missing {
				rdn++
				next()
				continue
			}
			order = append(order, added{dev: cur, number: dnum, raidDisk: rdn})
			rdn++
			if cur == moved && dnum != insertPoint {
				break
			}
			next()
		}
	}
	activeSlot := make([]bool, raid)
	for _, a := range order {
		role := uint16(superblock.RoleSpare)
		if a.raidDisk < raid {
			role = uint16(a.raidDisk)
			activeSlot[a.raidDisk] = true
		} else if a.dev == insertPoint {
			r.RecoverySpare = a.dev
		}
		roles[a.number] = role
		if uint32(a.number) >= sb.MaxDev && sb.MaxDev < maxDevs {
			sb.MaxDev = uint32(a.number + 1)
		}
	}
	for s, ok := range activeSlot {
		if !ok {
			r.MissingSlots = append(r.MissingSlots, s)
		}
	}
	if r.RecoverySpare >= 0 {
		// The kernel puts a spare into the lowest empty slot.
		r.RecoverySlot = r.MissingSlots[0]
	}
	r.Degraded = len(r.MissingSlots) > 0
	if err := checkEnough(level, layout, raid, activeSlot); err != nil {
		return nil, err
	}
	sb.DevRoles = roles[:sb.MaxDev]

	// ---- internal bitmap (add_internal_bitmap1 at create) ----
	var bms *bitmap.Header
	var bitmapSize uint64 // sectors covered
	if level == LevelRAID10 {
		near, far, _ := RAID10Copies(layout)
		bitmapSize = size * uint64(raid) / uint64(near*far) * 2
	} else {
		bitmapSize = size * 2
	}
	if wantBitmap {
		room := int64(chooseBmSpace(sb.Size)) // + bbl 8 - bbl 8
		bchunk, err := bitmap.ChooseChunk(room, bitmapSize, o.BitmapChunk)
		if err != nil {
			return nil, errorf(1, "Given bitmap chunk size not supported.")
		}
		offset := int64(8)
		if minor == 0 {
			offset = bitmap.BeforeSuperOffset(bitmapSize, bchunk, 8)
		}
		sb.BitmapOffset = int32(offset)
		sb.FeatureMap |= superblock.FeatureBitmapOffset
		bms = &bitmap.Header{
			Magic:       bitmap.Magic,
			Version:     bitmap.Version,
			UUID:        sb.SetUUID,
			ChunkSize:   uint32(bchunk),
			DaemonSleep: bitmap.DefaultDaemonSleep,
			SyncSize:    bitmapSize,
		}
		r.Bitmap = true
		r.BitmapChunk = bchunk
		r.BitmapSyncSize = bitmapSize
		r.BitmapOffset = sb.BitmapOffset
	}

	// ---- raid0 layout feature (write_init_super1) ----
	raid0NeedLayout := false
	if level == LevelRAID0 && layout != 0 && len(order) > 0 {
		chunkSectors := uint64(sb.ChunkSize)
		sizeOf := func(dev int) uint64 {
			s := o.Devices[dev].Sectors * 512 // mdadm compares bytes here
			if o.DataOffset != 0 {
				s -= o.DataOffset
			}
			return s / chunkSectors
		}
		first := sizeOf(order[0].dev)
		for _, a := range order {
			if sizeOf(a.dev) != first {
				raid0NeedLayout = true
			}
		}
	}

	// ---- per member (write_init_super1) ----
	for _, a := range order {
		d := o.Devices[a.dev]
		m := *sb
		m.DevRoles = append([]uint16(nil), sb.DevRoles...)
		m.DevNumber = uint32(a.number)
		m.DevFlags = 0
		if _, err := io.ReadFull(rnd, m.DeviceUUID[:]); err != nil {
			return nil, fmt.Errorf("random uuid: %w", err)
		}
		m.Events = 0
		dsize := d.Sectors
		if dsize < 24 {
			return nil, errorf(1, "Failed to write metadata to %s", d.Path)
		}
		arraySize := m.Size
		var bmSpace uint64
		var bmOffset int64
		if bms != nil {
			bmSpace = bitmap.AreaSize(bms, 4096) >> 9
			bmOffset = int64(m.BitmapOffset)
		} else {
			bmSpace = chooseBmSpace(arraySize)
			bmOffset = 8
		}
		dataOffset := stDataOffset
		if o.DataOffset != 0 {
			dataOffset = o.DataOffset
		}
		var sbOffset uint64
		switch minor {
		case 0:
			bmSpace += 8
			sbOffset = (dsize - 16) &^ 7
			m.DataOffset = dataOffset
			m.SuperOffset = sbOffset
			if sbOffset < arraySize {
				return nil, errorf(1, "%s is smaller than the component size", d.Path)
			}
			if sbOffset < arraySize+bmSpace {
				bmSpace = sbOffset - arraySize
			}
			m.DataSize = sbOffset - bmSpace
			if bmSpace >= 8 {
				m.BBLogSize = 8
				m.BBLogOffset = -8
			}
		default:
			sbOffset = 0
			if minor == 2 {
				sbOffset = 8
			}
			m.SuperOffset = sbOffset
			m.DataOffset = dataOffset
			m.DataSize = dsize - dataOffset
			switch {
			case int64(dataOffset) >= int64(sbOffset)+bmOffset+int64(bmSpace)+8:
				m.BBLogSize = 8
				m.BBLogOffset = int32(bmOffset + int64(bmSpace))
			case dataOffset >= sbOffset+16:
				m.BBLogSize = 8
				m.BBLogOffset = int32(dataOffset - 8 - sbOffset)
			}
		}
		if raid0NeedLayout {
			m.FeatureMap |= superblock.FeatureRAID0Layout
		}
		if err := checkMember(&m, d, bms, minor); err != nil {
			return nil, err
		}
		mem := Member{
			Device:      a.dev,
			Path:        d.Path,
			DevNumber:   uint32(a.number),
			Role:        m.DevRoles[a.number],
			Superblock:  &m,
			SuperOffset: int64(sbOffset) * 512,
		}
		mem.SuperBytes = m.MarshalWithChecksum()
		mem.Writes = append(mem.Writes, Write{Offset: mem.SuperOffset, Data: mem.SuperBytes})
		if bms != nil {
			mem.BitmapOffset = (int64(sbOffset) + int64(m.BitmapOffset)) * 512
			mem.BitmapBytes = bitmap.NewArea(bms, 0xff, bitmap.AreaAlign(m.BitmapOffset))
			mem.Writes = append(mem.Writes, Write{Offset: mem.BitmapOffset, Data: mem.BitmapBytes})
		}
		r.Members = append(r.Members, mem)
	}
	if level == LevelRAID0 && !raid0NeedLayout {
		var sizes []uint64
		for _, m := range r.Members {
			sizes = append(sizes, m.Superblock.DataSize)
		}
		if multiZone(sizes, uint64(sb.ChunkSize)) {
			// mdadm writes the superblocks, then RUN_ARRAY fails.
			return nil, &Error{Status: 1, Lines: []string{
				"members of different sizes need a raid0 layout, the md driver would refuse to run this array",
				"Please use --layout=original or --layout=alternate"}}
		}
	}
	r.ArraySizeKiB = arraySizeKiB(r)
	r.KernelComponentSectors = r.ComponentSectors
	if level == LevelRAID10 {
		r.KernelComponentSectors = raid10DevSectors(r.ComponentSectors, chunk*2, layout, raid)
	}
	if r.ArraySizeKiB == 0 {
		// md would run an array of 0 bytes: a raid1 member with less than
		// 64K of data space (mdadm rounds the size down to 64K), a raid10
		// far layout with fewer chunks per device than copies, ...
		dev := "a member"
		if mindisc >= 0 {
			dev = o.Devices[mindisc].Path
		}
		return nil, errorf(1, "%s is too small for this array: %dK of data space gives an array of size 0", dev, minsize)
	}
	return r, nil
}

// checkMember refuses layouts the kernel would reject or that would make
// metadata overlap data. mdadm 4.2 itself has no such checks; they only
// trigger with an explicit --data-offset or odd block sizes.
func checkMember(sb *superblock.Superblock, d Device, bms *bitmap.Header, minor int) error {
	lbs := uint64(d.LogicalBlockSize)
	if lbs == 0 {
		lbs = 512
	}
	if minor != 0 {
		sbSectors := roundUp(uint64(sb.WriteSize()), lbs) / 512
		if sb.DataOffset < sb.SuperOffset+sbSectors {
			return errorf(1, "data offset %d sectors on %s overlaps the superblock", sb.DataOffset, d.Path)
		}
		if bms != nil {
			end := int64(sb.SuperOffset) + int64(sb.BitmapOffset) + int64(bitmap.AreaSize(bms, 4096)>>9)
			if end > int64(sb.DataOffset) {
				return errorf(1, "internal bitmap does not fit before the data offset (%d sectors) on %s", sb.DataOffset, d.Path)
			}
		}
	}
	if sb.DataOffset*512%lbs != 0 {
		return errorf(1, "data offset %d sectors is not a multiple of the %d-byte logical block size of %s", sb.DataOffset, lbs, d.Path)
	}
	if sb.DataSize < 10 || sb.DataSize < sb.Size {
		return errorf(1, "no free space left on %s", d.Path)
	}
	if err := sb.CheckDevice(d.Sectors); err != nil {
		return &Error{Status: 1, Lines: []string{fmt.Sprintf("internal error: planned metadata for %s is inconsistent: %v", d.Path, err)}}
	}
	return nil
}

// checkEnough refuses arrays with too many missing slots for the kernel to
// start them (mdadm 4.2 writes the superblocks and then RUN_ARRAY fails).
func checkEnough(level int, layout uint32, raid int, present []bool) error {
	missing := 0
	for _, p := range present {
		if !p {
			missing++
		}
	}
	name, _ := LevelName(level)
	tooMany := func(allowed int) error {
		return errorf(1, "too many missing devices for %s: %d of %d raid devices missing, at most %d allowed",
			name, missing, raid, allowed)
	}
	switch level {
	case LevelRAID1:
		if missing >= raid {
			return tooMany(raid - 1)
		}
	case LevelRAID4, LevelRAID5:
		if missing > 1 {
			return tooMany(1)
		}
	case LevelRAID6:
		if missing > 2 {
			return tooMany(2)
		}
	case LevelRAID10:
		if !Enough(level, raid, layout, true, present) {
			return errorf(1, "too many missing devices for raid10: every copy of some data would be missing")
		}
	}
	return nil
}

// multiZone reports whether raid0 members with these data sizes form
// zones the md driver can only map with a layout: more than one zone and
// more than one device beyond the smallest (raid0.c create_strip_zones).
func multiZone(dataSizes []uint64, chunkSectors uint64) bool {
	if chunkSectors == 0 || len(dataSizes) == 0 {
		return false
	}
	smallest := ^uint64(0)
	for _, s := range dataSizes {
		if s/chunkSectors < smallest {
			smallest = s / chunkSectors
		}
	}
	bigger := 0
	for _, s := range dataSizes {
		if s/chunkSectors > smallest {
			bigger++
		}
	}
	return bigger > 1
}

// arraySizeKiB is the array size the Linux 6.1 md personality computes.
func arraySizeKiB(r *Result) uint64 {
	comp := r.ComponentSectors
	chunkSectors := r.ChunkKiB * 2
	switch r.Level {
	case LevelLinear, LevelRAID0:
		var sum uint64
		for _, m := range r.Members {
			if int(m.Role) >= r.RaidDisks {
				continue
			}
			s := m.Superblock.DataSize
			if chunkSectors != 0 {
				s = s / chunkSectors * chunkSectors
			}
			sum += s
		}
		return sum / 2
	case LevelRAID1:
		return comp / 2
	case LevelRAID4, LevelRAID5:
		return comp / 2 * uint64(r.RaidDisks-1)
	case LevelRAID6:
		return comp / 2 * uint64(r.RaidDisks-2)
	case LevelRAID10:
		return raid10Sectors(comp, chunkSectors, r.Layout, r.RaidDisks) / 2
	}
	return 0
}

// raid10DevSectors is calc_sectors from the md driver: the sectors of
// each member the raid10 array really uses.
func raid10DevSectors(devSectors, chunkSectors uint64, layout uint32, disks int) uint64 {
	near, far, _ := RAID10Copies(layout)
	if chunkSectors == 0 || near == 0 || far == 0 || disks == 0 {
		return 0
	}
	shift := uint(bits.TrailingZeros64(chunkSectors))
	rd := uint64(disks)
	size := devSectors >> shift
	size /= uint64(far)
	size *= rd
	size /= uint64(near) // chunks in the array
	size *= uint64(near * far)
	size = (size + rd - 1) / rd // used chunks per device, rounded up
	return size << shift
}

// raid10Sectors is raid10_size from the md driver, applied to the
// per-device sectors calc_sectors leaves.
func raid10Sectors(devSectors, chunkSectors uint64, layout uint32, disks int) uint64 {
	near, far, _ := RAID10Copies(layout)
	dev := raid10DevSectors(devSectors, chunkSectors, layout, disks)
	if dev == 0 {
		return 0
	}
	shift := uint(bits.TrailingZeros64(chunkSectors))
	s := dev >> shift
	s /= uint64(far)
	s *= uint64(disks)
	s /= uint64(near)
	return s << shift
}
