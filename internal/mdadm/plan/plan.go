// Package plan computes, without doing any I/O, exactly what
// `mdadm --create` (mdadm 4.2) writes to each member for v1.0, v1.1 and
// v1.2 metadata: every superblock field, the internal bitmap area, and
// where each goes, plus the array-level facts (sizes, offsets, layout,
// whether the kernel will resync or rebuild).
//
// The rules follow mdadm 4.2's Create.c and super1.c (validate_geometry1,
// init_super1, add_to_super1, add_internal_bitmap1, write_init_super1,
// store_super1, write_bitmap1); array sizes follow the Linux 6.1 md
// personalities. Refusals are returned as *Refusal: the reason and its data, which cmd
// words as mdadm words them.
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
	// Major, Minor: the block device's numbers (0.90's disk table), 0 for
	// an image file.
	Major, Minor uint32
	// WriteMostly, FailFast: --write-mostly, --failfast before the
	// device (the member's devflags).
	WriteMostly, FailFast bool
	// Journal: the device is the raid4/5/6 write journal
	// (--write-journal): role RoleJournal, outside the size rules.
	Journal bool
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
	// BitmapDelay is --delay: the bitmap's daemon_sleep in seconds; 0 =
	// mdadm's default (bitmap.DefaultDaemonSleep).
	BitmapDelay uint32
	// WriteBehind is --write-behind: the bitmap's write_behind (0: not
	// given).
	WriteBehind uint32
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
	// V090 is the 0.90 superblock written (Superblock is then its v1
	// view, superblock.V1View).
	V090 *superblock.SuperblockV090
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
	// BitmapFileHeader is the header of the bitmap file for
	// --bitmap=FILE (NewBitmapFile gives its content); nil otherwise.
	BitmapFileHeader *bitmap.Header

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
	Warnings []Warning
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
	if is090(s) {
		return Minor090, false, nil
	}
	switch t {
	case "ddf", "imsm":
		return 0, false, refuseArg(MetadataUnsupported, s)
	}
	return 0, false, refuseArg(MetadataUnknown, s)
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
// returns every refusal before anything could be written. The phases run
// in mdadm's order, so that the first refusal is the one mdadm gives.
func Plan(o Options) (*Result, error) {
	p := &planner{o: o, r: &Result{RecoverySpare: -1, RecoverySlot: -1}}
	for _, phase := range []func() error{
		p.parseArguments, // mdadm.c: metadata, level, layout, values
		p.checkArguments, // mdadm.c: bitmap, counts
		p.checkGeometry,  // Create(): counts against the level, layout, chunk, size
		p.checkGeometry090,
		p.measureDevices, // Create() with validate_geometry1: sizes, offsets
		p.chooseSize,     // the component size, the bitmap, the warnings
		p.checkSize090,
		p.chooseRecovery, // raid4/5/6: recover onto a spare instead of resync
		p.chooseName,     // the array name and homehost
		p.initSuper,      // init_super1
		p.assignSlots,    // Create()'s device loop: numbers and roles
		p.addBitmap,      // add_internal_bitmap1
		p.planMembers,    // write_init_super1, per member
		p.fileBitmap,     // CreateBitmap for --bitmap=FILE
		p.checkArray,     // what the md driver would refuse or run empty
	} {
		if err := phase(); err != nil {
			return nil, err
		}
	}
	return p.r, nil
}

// planner is Plan's state, filled in phase by phase.
type planner struct {
	o Options
	r *Result

	minor       int
	level       int
	layout      uint32
	layoutGiven bool
	homehost    string
	raid        int
	spares      int
	subdevs     int
	chunk       uint64 // KiB
	size        uint64 // KiB per device

	// measureDevices
	stDataOffset                  uint64
	minsize, maxsize              uint64
	mindisc, maxdisc              int
	firstMissing, secondMissing   int
	missingDisks, working, active int
	warnings                      []Warning

	wantBitmap  bool
	insertPoint int
	name        string
	rnd         io.Reader
	sb          *superblock.Superblock
	order       []added
	bms         *bitmap.Header
}

// added is one device as Create's loop adds it: its index in the device
// list, its dev_number and its raid slot (>= raid for a spare).
type added struct {
	dev      int
	number   int
	raidDisk int
}

// parseArguments checks the metadata, the level and the values as
// mdadm's command-line parsing does.
func (p *planner) parseArguments() error {
	o, r := &p.o, p.r
	minor, defaulted, err := parseMetadata(o.Metadata)
	if err != nil {
		return err
	}
	p.minor = minor
	r.Minor, r.DefaultedMetadata = minor, defaulted
	r.Metadata = fmt.Sprintf("1.%d", minor)
	if minor == Minor090 {
		r.Metadata = "0.90"
	}

	if o.Level == "" {
		return refuse(NoLevel)
	}
	level, err := ParseLevel(o.Level)
	if err != nil {
		return err
	}
	switch level {
	case LevelFaulty:
		return refuseArg(LevelUnsupported, o.Level)
	case LevelContainer:
		return refuse(NoContainers)
	}
	p.level = level
	r.Level = level
	r.LevelName, _ = LevelName(level)

	p.layoutGiven = o.Layout != ""
	if p.layoutGiven {
		if p.layout, err = ParseLayout(level, o.Layout); err != nil {
			return err
		}
	}
	if o.ChunkKiB != 0 && o.ChunkKiB < 4 {
		return &Refusal{Kind: InvalidChunkKiB, Have: o.ChunkKiB}
	}
	if o.SizeKiB != 0 && o.SizeKiB < 4 {
		return &Refusal{Kind: InvalidSizeKiB, Have: o.SizeKiB}
	}
	if len(o.Name) > 32 {
		return refuseArg(NameTooLong, o.Name)
	}
	return nil
}

// checkArguments checks the bitmap and the device counts as mdadm's
// command-line parsing does.
func (p *planner) checkArguments() error {
	o := &p.o
	switch {
	case o.Bitmap == "" || o.Bitmap == "internal" || o.Bitmap == "none":
	case o.Bitmap == "clustered":
		return refuse(BitmapClustered)
	case strings.Contains(o.Bitmap, "/"): // a bitmap file (bitmapfile.go)
	default:
		return refuseArg(BitmapInvalid, o.Bitmap)
	}
	if o.DataOffset != 0 && p.minor == 0 {
		// mdadm 4.2 stores it but still sizes the data up to the end
		// metadata, so the data would run over the superblock.
		return refuse(DataOffsetOn10)
	}
	if o.BitmapChunk != 0 && (o.BitmapChunk < 512 || o.BitmapChunk&(o.BitmapChunk-1) != 0) {
		return &Refusal{Kind: InvalidBitmapBytes, Have: o.BitmapChunk}
	}
	if o.SpareDevices < 0 {
		return &Refusal{Kind: InvalidSpares, Count: o.SpareDevices}
	}
	if o.RaidDevices < 0 {
		return &Refusal{Kind: InvalidRaidDevices, Count: o.RaidDevices}
	}
	if o.SpareDevices > 0 && (p.level == LevelRAID0 || p.level == LevelLinear) {
		return refuseArg(SparesIncompatible, o.Level)
	}
	if err := p.checkJournal(); err != nil {
		return err
	}
	if o.RaidDevices == 1 && !o.Force {
		return refuse(OneDevice)
	}
	if o.RaidDevices == 0 {
		return refuse(NoRaidDevices)
	}
	p.homehost = ResolveHomehost(o.Homehost, o.Homehost != "", nil, func() (string, error) { return o.SystemHostname, nil })
	p.r.Homehost = p.homehost
	return nil
}

// checkGeometry is the start of mdadm's Create(): the device counts
// against the level, the layout, the chunk and --size.
func (p *planner) checkGeometry() error {
	o, r, level := &p.o, p.r, p.level
	p.raid, p.spares, p.subdevs = o.RaidDevices, o.SpareDevices, len(o.Devices)
	raid, spares, subdevs := p.raid, p.spares, p.subdevs
	journals := p.journals()
	switch {
	case raid < 4 && level == LevelRAID6:
		return refuse(RAID6TooFew)
	case raid > 256 && level == LevelRAID6:
		return refuse(RAID6TooMany)
	case raid < 2 && level >= LevelRAID4:
		return &Refusal{Kind: TooFewForLevel, Count: level}
	case level <= 0 && spares > 0:
		return refuse(NoSpares)
	case subdevs > raid+spares+journals:
		return &Refusal{Kind: TooManyListed, Have: uint64(subdevs), Need: uint64(raid + spares + journals)}
	case subdevs < raid+spares+journals:
		return refuse(NotEnoughListed)
	case o.Bitmap != "" && level <= 0:
		return &Refusal{Kind: BitmapNotMeaningful, Level: r.LevelName}
	}
	if !p.layoutGiven {
		p.layout = DefaultLayout(level)
	}
	if level == LevelRAID10 {
		near, far, _ := RAID10Copies(p.layout)
		if near*far > raid {
			return &Refusal{Kind: LayoutNeedsDevices, Need: uint64(near * far)}
		}
		if near*far < 2 {
			// mdadm accepts this; the md driver refuses to run it.
			return refuseArg(RAID10NoRedundancy, o.Layout)
		}
	}
	r.Layout = p.layout
	r.LayoutName = LayoutName(level, p.layout)
	if err := p.chooseChunk(); err != nil {
		return err
	}
	p.size = o.SizeKiB
	if p.size != 0 && p.chunk != 0 {
		p.size &^= p.chunk - 1 // mdadm masks (exact for powers of two)
		if p.size == 0 {
			return refuse(SizeBelowChunk)
		}
	}
	// Duplicate devices: mdadm fails on the second exclusive open.
	seen := map[string]int{}
	for i, d := range o.Devices {
		if d.Missing {
			continue
		}
		if j, ok := seen[d.Path]; ok {
			return &Refusal{Kind: DuplicateDevice, Device: d.Path, Have: uint64(j + 1), Need: uint64(i + 1)}
		}
		seen[d.Path] = i
	}
	return nil
}

// chooseChunk applies the default chunk of the striped levels and
// refuses a chunk the level cannot use.
func (p *planner) chooseChunk() error {
	chunk := p.o.ChunkKiB
	switch p.level {
	case LevelRAID0, LevelRAID4, LevelRAID5, LevelRAID6, LevelRAID10:
		if chunk == 0 {
			chunk = DefaultChunkKiB
		}
		if p.level != LevelRAID0 && chunk&(chunk-1) != 0 {
			// mdadm passes it on; the md driver refuses to run the array.
			return &Refusal{Kind: ChunkNotPowerOf2, Have: chunk, Level: p.r.LevelName}
		}
	case LevelRAID1, LevelMultipath:
		if chunk != 0 {
			return refuse(ChunkForbidden)
		}
	}
	p.chunk = chunk
	p.r.ChunkKiB = chunk
	return nil
}

// measureDevices is Create()'s loop over the devices with
// validate_geometry1: the data offset (from the first device), the free
// space of each device, the smallest and the largest, the missing slots.
func (p *planner) measureDevices() error {
	o := &p.o
	var (
		haveDefaultOffset bool
		fail              []*Refusal
		bootNote          bool
	)
	p.mindisc, p.maxdisc = -1, -1
	p.firstMissing, p.secondMissing = p.subdevs*2, p.subdevs*2
	for dnum, d := range o.Devices {
		if d.Missing {
			if p.firstMissing > dnum {
				p.firstMissing = dnum
			}
			if p.secondMissing > dnum && dnum > p.firstMissing {
				p.secondMissing = dnum
			}
			p.missingDisks++
			continue
		}
		p.working++
		if dnum < p.raid && !d.Journal {
			p.active++
		}
		dataOffset := o.DataOffset
		if dataOffset == 0 {
			if haveDefaultOffset {
				dataOffset = p.stDataOffset
			} else if p.minor != 0 && p.minor != Minor090 {
				dataOffset = defaultDataOffset(d.Sectors, p.chunk)
			}
		}
		if !haveDefaultOffset {
			haveDefaultOffset, p.stDataOffset = true, dataOffset
		}
		freesize, refusal := p.freeSpace(d, dataOffset)
		if refusal != nil {
			fail = append(fail, refusal)
			continue
		}
		if d.Journal {
			continue // Create()'s skip_size_check
		}
		if p.maxdisc < 0 || freesize > p.maxsize {
			p.maxdisc, p.maxsize = dnum, freesize
		}
		if p.mindisc < 0 || freesize < p.minsize {
			p.mindisc, p.minsize = dnum, freesize
		}
		if p.r.DefaultedMetadata && p.minor >= 1 && p.level == LevelRAID1 && !bootNote {
			bootNote = true
			p.warnings = append(p.warnings, Warning{Kind: BootNote})
		}
	}
	switch {
	case p.missingDisks == p.subdevs:
		return refuse(AllMissing)
	case p.minor == Minor090 && p.raid+p.spares > superblock.Disks090:
		return &Refusal{Kind: TooManyDevices, Arg: "0.90", Need: superblock.Disks090}
	case p.raid+p.spares > maxDevs:
		return &Refusal{Kind: TooManyDevices, Arg: "1.x", Need: maxDevs}
	case len(fail) > 0:
		return &Refusal{Kind: CreateAborted, Fails: fail}
	}
	return nil
}

// freeSpace is validate_geometry1's usable size of one device in KiB
// (rounded to the chunk), or why the device cannot be used.
func (p *planner) freeSpace(d Device, dataOffset uint64) (uint64, *Refusal) {
	devsize := d.Sectors
	var freesize uint64
	tooSmall := false
	if p.minor == Minor090 {
		if devsize < superblock.Reserved090/512 {
			return 0, refuseDevice(NotSuitable, d.Path)
		}
		freesize = superblock.Offset090(devsize*512) / 512
	} else if p.minor == 0 {
		devsize &^= 7
		overhead := 8*2 + 8 + chooseBmSpace(d.Sectors)
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
		return 0, &Refusal{Kind: DeviceTooSmall, Device: d.Path, Have: devsize >> 1}
	}
	if d.Journal {
		return 0, nil // no size rules for the journal
	}
	freesize /= 2
	if p.chunk != 0 {
		freesize &^= p.chunk - 1
	}
	if freesize == 0 {
		return 0, refuseDevice(NoFreeSpace, d.Path)
	}
	if p.size != 0 && freesize < p.size {
		return 0, &Refusal{Kind: SmallerThanSize, Device: d.Path, Have: freesize, Need: p.size}
	}
	return freesize, nil
}

// chooseSize settles the component size (the smallest device's when
// --size is not given), whether to add a bitmap, and the warnings.
func (p *planner) chooseSize() error {
	o, r := &p.o, p.r
	if p.size == 0 && (p.level > 0 || p.level == LevelMultipath) {
		p.size = p.minsize
		if p.level == LevelRAID1 {
			p.size &^= 64 - 1
		}
	}
	r.DataOffset = p.stDataOffset

	p.wantBitmap = o.Bitmap == "internal"
	if o.Bitmap == "" && p.level >= 1 && p.size > 100*1024*1024 {
		p.wantBitmap, r.AutoBitmap = true, true
	}
	if p.level > 0 && (p.maxsize-p.size)*100 > p.maxsize {
		p.warnings = append(p.warnings, Warning{Kind: LargestExceedsSize, Device: o.Devices[p.maxdisc].Path, SizeKiB: p.size})
	}
	r.Warnings = p.warnings
	return nil
}

// chooseRecovery is mdadm's choice, for raid4/5 (and raid6 created with
// one device missing), to add the last device as a spare so that the
// kernel rebuilds it rather than resyncing the whole array.
func (p *planner) chooseRecovery() error {
	o, raid := &p.o, p.raid
	p.insertPoint = p.subdevs * 2
	if !o.AssumeClean && !o.Force && p.firstMissing >= raid && (p.level == LevelRAID4 || p.level == LevelRAID5) {
		p.insertPoint = raid - 1
		p.spares++
		p.active--
		p.missingDisks++
	}
	if !o.AssumeClean && !o.Force && p.firstMissing < raid && p.secondMissing >= raid && p.level == LevelRAID6 {
		p.insertPoint = raid - 1
		if p.insertPoint == p.firstMissing {
			p.insertPoint--
		}
		p.spares++
		p.active--
		p.missingDisks++
	}
	if p.level <= 0 && p.firstMissing < p.subdevs*2 {
		return refuse(MissingUnsupported)
	}
	return nil
}

// chooseName derives the array name and refuses names and homehosts that
// could not be shown or written into an ARRAY line.
func (p *planner) chooseName() error {
	o := &p.o
	name := o.Name
	if name == "" {
		if o.MDDevice == "" {
			return refuse(NoName)
		}
		var err error
		if name, err = ArrayName(o.MDDevice); err != nil {
			return err
		}
	} else if o.MDDevice != "" {
		if _, err := chosenName(o.MDDevice); err != nil {
			return err
		}
	}
	if err := CheckName("name", name); err != nil {
		return err
	}
	if MapUnsafe(o.MDDevice, '_') != o.MDDevice {
		return refuseArg(UnsafeMDDevice, o.MDDevice)
	}
	if StoredName(name, p.homehost) != StoredName(name, "") {
		if err := CheckName("homehost", p.homehost); err != nil {
			return err
		}
	}
	p.name = name
	return nil
}

// initSuper is init_super1: the superblock all members share.
func (p *planner) initSuper() error {
	o, r, level, raid := &p.o, p.r, p.level, p.raid
	clean := ((level == LevelRAID4 || level == LevelRAID5) && (p.insertPoint < raid || p.firstMissing < raid)) ||
		(level == LevelRAID6 && (p.insertPoint < raid || p.secondMissing < raid)) ||
		level <= 0 || o.AssumeClean
	p.rnd = o.Rand
	if p.rnd == nil {
		p.rnd = rand.Reader
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	sb := &superblock.Superblock{
		Magic:        superblock.Magic,
		MajorVersion: 1,
		Level:        int32(level),
		Layout:       p.layout,
		Size:         p.size * 2,
		ChunkSize:    uint32(p.chunk * 1024 >> 9),
		RaidDisks:    uint32(raid),
		DataOffset:   p.stDataOffset,
		Events:       1,
	}
	if o.UUID != nil {
		sb.SetUUID = *o.UUID
	} else if _, err := io.ReadFull(p.rnd, sb.SetUUID[:]); err != nil {
		return fmt.Errorf("random uuid: %w", err)
	}
	sb.SetNameString(StoredName(p.name, p.homehost))
	sb.CTime = superblock.MakeTime(now.Unix(), 0)
	sb.UTime = sb.CTime
	if clean {
		sb.ResyncOffset = superblock.MaxSector
	}
	sbSpares := p.working - p.active
	if raid+sbSpares > maxDevs {
		return &Refusal{Kind: TooManyRequested, Have: uint64(raid), Count: sbSpares, Need: maxDevs}
	}
	sbsize := roundUp(superblock.HeaderSize+2*uint64(raid+sbSpares), 512)
	sb.MaxDev = uint32((sbsize - superblock.HeaderSize) / 2)
	p.sb = sb

	r.RaidDisks = raid
	r.SpareDisks = p.spares
	r.ComponentSectors = sb.Size
	r.ResyncOffset = sb.ResyncOffset
	r.NeedsResync = !clean
	r.Name = sb.Name()
	r.UUID = sb.SetUUID
	r.CTime = sb.CTime
	return nil
}

// addOrder is Create()'s device loop: the order in which mdadm adds the
// devices, their dev_numbers and raid slots. The device at insertPoint
// (the recovery spare) is skipped and added last.
func (p *planner) addOrder() []added {
	var order []added
	devices := p.o.Devices
	dnum, rdn := 0, 0
	moved := -1
	i := 0
	for i >= 0 {
		cur := i
		next := func() {
			if cur+1 < len(devices) {
				i = cur + 1
			} else {
				i = moved
			}
			dnum++
		}
		if dnum == p.insertPoint {
			rdn++
			moved = cur
			next()
			continue
		}
		if devices[cur].Missing {
			rdn++
			next()
			continue
		}
		if devices[cur].Journal {
			// Create(): MD_DISK_ROLE_JOURNAL, raid_disk_num not advanced
			order = append(order, added{dev: cur, number: dnum, raidDisk: -1})
			if cur == moved {
				break
			}
			next()
			continue
		}
		order = append(order, added{dev: cur, number: dnum, raidDisk: rdn})
		rdn++
		if cur == moved && dnum != p.insertPoint {
			break
		}
		next()
	}
	return order
}

// assignSlots fills in dev_roles and finds the empty slots.
func (p *planner) assignSlots() error {
	r, sb, raid := p.r, p.sb, p.raid
	roles := make([]uint16, maxDevs)
	for i := range roles {
		roles[i] = superblock.RoleSpare
	}
	p.order = p.addOrder()
	activeSlot := make([]bool, raid)
	for _, a := range p.order {
		role := uint16(superblock.RoleSpare)
		if a.raidDisk < 0 {
			role = superblock.RoleJournal
			sb.FeatureMap |= superblock.FeatureJournal
		} else if a.raidDisk < raid {
			role = uint16(a.raidDisk)
			activeSlot[a.raidDisk] = true
		} else if a.dev == p.insertPoint {
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
	if err := checkEnough(p.level, p.layout, raid, activeSlot); err != nil {
		return err
	}
	sb.DevRoles = roles[:sb.MaxDev]
	return nil
}

// addBitmap is add_internal_bitmap1 at create time.
func (p *planner) addBitmap() error {
	if p.minor == Minor090 {
		return p.addBitmap090()
	}
	r, sb := p.r, p.sb
	var bitmapSize uint64 // sectors covered
	if p.level == LevelRAID10 {
		near, far, _ := RAID10Copies(p.layout)
		bitmapSize = p.size * uint64(p.raid) / uint64(near*far) * 2
	} else {
		bitmapSize = p.size * 2
	}
	if !p.wantBitmap {
		return nil
	}
	room := int64(chooseBmSpace(sb.Size)) // + bbl 8 - bbl 8
	bchunk, err := bitmap.ChooseChunk(room, bitmapSize, p.o.BitmapChunk)
	if err != nil {
		return refuse(BitmapChunkUnsupported)
	}
	offset := int64(8)
	if p.minor == 0 {
		offset = bitmap.BeforeSuperOffset(bitmapSize, bchunk, 8)
	}
	sb.BitmapOffset = int32(offset)
	sb.FeatureMap |= superblock.FeatureBitmapOffset
	p.bms = &bitmap.Header{
		Magic:       bitmap.Magic,
		Version:     bitmap.Version,
		UUID:        sb.SetUUID,
		ChunkSize:   uint32(bchunk),
		DaemonSleep: bitmap.DefaultDaemonSleep,
		SyncSize:    bitmapSize,
	}
	if p.o.BitmapDelay != 0 {
		p.bms.DaemonSleep = p.o.BitmapDelay
	}
	p.bms.WriteBehind = p.o.WriteBehind
	r.Bitmap = true
	r.BitmapChunk = bchunk
	r.BitmapSyncSize = bitmapSize
	r.BitmapOffset = sb.BitmapOffset
	return nil
}

// raid0NeedsLayout is write_init_super1's test for the raid0 layout
// feature: a raid0 layout was chosen and the members differ in size.
func (p *planner) raid0NeedsLayout() bool {
	if p.level != LevelRAID0 || p.layout == 0 || len(p.order) == 0 {
		return false
	}
	chunkSectors := uint64(p.sb.ChunkSize)
	sizeOf := func(dev int) uint64 {
		s := p.o.Devices[dev].Sectors * 512 // mdadm compares bytes here
		if p.o.DataOffset != 0 {
			s -= p.o.DataOffset
		}
		return s / chunkSectors
	}
	first := sizeOf(p.order[0].dev)
	for _, a := range p.order {
		if sizeOf(a.dev) != first {
			return true
		}
	}
	return false
}

// planMembers is write_init_super1 for every member, in mdadm's order.
func (p *planner) planMembers() error {
	if p.minor == Minor090 {
		return p.planMembers090()
	}
	needLayout := p.raid0NeedsLayout()
	for _, a := range p.order {
		d := p.o.Devices[a.dev]
		m := *p.sb
		m.DevRoles = append([]uint16(nil), p.sb.DevRoles...)
		m.DevNumber = uint32(a.number)
		m.DevFlags = 0
		if d.WriteMostly {
			m.DevFlags |= superblock.DevFlagWriteMostly
		}
		if d.FailFast {
			m.DevFlags |= superblock.DevFlagFailFast
		}
		if _, err := io.ReadFull(p.rnd, m.DeviceUUID[:]); err != nil {
			return fmt.Errorf("random uuid: %w", err)
		}
		if !d.Journal {
			m.Events = 0 // write_init_super1: the journal keeps init_super1's
		}
		sbOffset, err := p.placeMetadata(&m, d)
		if err != nil {
			return err
		}
		if needLayout {
			m.FeatureMap |= superblock.FeatureRAID0Layout
		}
		if err := checkMember(&m, d, p.bms, p.minor); err != nil {
			return err
		}
		mem := p.member(a, d, &m, sbOffset)
		if d.Journal {
			if err := p.journalMeta(&mem); err != nil {
				return err
			}
		}
		p.r.Members = append(p.r.Members, mem)
	}
	if p.level == LevelRAID0 && !needLayout {
		var sizes []uint64
		for _, m := range p.r.Members {
			sizes = append(sizes, m.Superblock.DataSize)
		}
		if multiZone(sizes, uint64(p.sb.ChunkSize)) {
			// mdadm writes the superblocks, then RUN_ARRAY fails.
			return refuse(RAID0NeedsLayout)
		}
	}
	return nil
}

// placeMetadata sets one member's superblock offset, data offset and
// size and its bad-block log, and returns the superblock offset
// (sectors).
func (p *planner) placeMetadata(m *superblock.Superblock, d Device) (uint64, error) {
	dsize := d.Sectors
	if dsize < 24 {
		return 0, refuseDevice(WriteMetadataFailed, d.Path)
	}
	arraySize := m.Size
	var bmSpace uint64
	var bmOffset int64
	if p.bms != nil {
		bmSpace = bitmap.AreaSize(p.bms, 4096) >> 9
		bmOffset = int64(m.BitmapOffset)
	} else {
		bmSpace = chooseBmSpace(arraySize)
		bmOffset = 8
	}
	dataOffset := p.stDataOffset
	if p.o.DataOffset != 0 {
		dataOffset = p.o.DataOffset
	}
	var sbOffset uint64
	switch p.minor {
	case 0:
		bmSpace += 8
		sbOffset = (dsize - 16) &^ 7
		m.DataOffset = dataOffset
		m.SuperOffset = sbOffset
		if sbOffset < arraySize {
			return 0, refuseDevice(SmallerThanComponent, d.Path)
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
		if p.minor == 2 {
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
	return sbOffset, nil
}

// member is the writes of one member: its superblock, then its bitmap.
func (p *planner) member(a added, d Device, m *superblock.Superblock, sbOffset uint64) Member {
	mem := Member{
		Device:      a.dev,
		Path:        d.Path,
		DevNumber:   uint32(a.number),
		Role:        m.DevRoles[a.number],
		Superblock:  m,
		SuperOffset: int64(sbOffset) * 512,
	}
	mem.SuperBytes = m.MarshalWithChecksum()
	mem.Writes = append(mem.Writes, Write{Offset: mem.SuperOffset, Data: mem.SuperBytes})
	if p.bms != nil {
		mem.BitmapOffset = (int64(sbOffset) + int64(m.BitmapOffset)) * 512
		mem.BitmapBytes = bitmap.NewArea(p.bms, 0xff, bitmap.AreaAlign(m.BitmapOffset))
		mem.Writes = append(mem.Writes, Write{Offset: mem.BitmapOffset, Data: mem.BitmapBytes})
	}
	return mem
}

// checkArray computes the sizes the md driver gives the array and
// refuses an array it would run with 0 bytes.
func (p *planner) checkArray() error {
	r := p.r
	r.ArraySizeKiB = arraySizeKiB(r)
	r.KernelComponentSectors = r.ComponentSectors
	if p.level == LevelRAID10 {
		r.KernelComponentSectors = raid10DevSectors(r.ComponentSectors, p.chunk*2, p.layout, p.raid)
	}
	if r.ArraySizeKiB == 0 {
		// md would run an array of 0 bytes: a raid1 member with less than
		// 64K of data space (mdadm rounds the size down to 64K), a raid10
		// far layout with fewer chunks per device than copies, ...
		dev := ""
		if p.mindisc >= 0 {
			dev = p.o.Devices[p.mindisc].Path
		}
		return &Refusal{Kind: ArrayEmpty, Device: dev, Have: p.minsize}
	}
	return nil
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
			return &Refusal{Kind: DataOffsetOverlaps, Device: d.Path, Have: sb.DataOffset}
		}
		if bms != nil {
			end := int64(sb.SuperOffset) + int64(sb.BitmapOffset) + int64(bitmap.AreaSize(bms, 4096)>>9)
			if end > int64(sb.DataOffset) {
				return &Refusal{Kind: BitmapOverData, Device: d.Path, Have: sb.DataOffset}
			}
		}
	}
	if sb.DataOffset*512%lbs != 0 {
		return &Refusal{Kind: DataOffsetUnaligned, Device: d.Path, Have: sb.DataOffset, Need: lbs}
	}
	if sb.DataSize < 10 || (sb.DataSize < sb.Size && sb.DevRoles[sb.DevNumber] != superblock.RoleJournal) {
		return refuseDevice(NoFreeSpace, d.Path)
	}
	if err := sb.CheckDevice(d.Sectors); err != nil {
		return &Refusal{Kind: Inconsistent, Device: d.Path, Err: err}
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
		return &Refusal{Kind: TooManyMissing, Level: name, Have: uint64(missing), Need: uint64(raid), Count: allowed}
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
			return refuse(RAID10CopiesMissing)
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
	case LevelRAID1, LevelMultipath:
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
