package plan

import "fmt"

// Kind names the reason for a refusal. The rules library only states the
// reason and its data; cmd words it (in mdadm 4.2's text where mdadm has
// one) and chooses the exit status.
type Kind int

// The refusals, roughly in the order Plan checks them. The comment names
// the Refusal fields each kind fills in.
const (
	_ Kind = iota
	// Command-line values (mdadm.c's parsing).
	MetadataUnsupported // Arg: a metadata format mdtool does not write ("0.90", "ddf", "imsm")
	MetadataUnknown     // Arg
	NoLevel             // --level not given
	InvalidLevel        // Arg
	LevelUnsupported    // Arg: faulty
	NoContainers        // level container
	LayoutNotUnderstood // Arg, Level (raid0, raid5, raid6)
	LayoutRAID10Invalid // Arg
	LayoutNotMeaningful // Level ("(null)" for a level without a name)
	InvalidSize         // Arg
	InvalidSizeKiB      // Have: the size in KiB
	InvalidChunk        // Arg
	InvalidChunkKiB     // Have: the chunk in KiB
	InvalidBitmapChunk  // Arg
	InvalidBitmapBytes  // Have: the bitmap chunk in bytes
	NameTooLong         // Arg
	BitmapClustered     // --bitmap=clustered
	BitmapFile          // Arg: an external bitmap file
	BitmapInvalid       // Arg
	DataOffsetOn10      // --data-offset with 1.0 metadata
	InvalidSpares       // Count
	InvalidRaidDevices  // Count
	SparesIncompatible  // Arg: the level as given
	OneDevice           // -n 1 without --force
	NoRaidDevices       // -n not given
	JournalLevel        // --write-journal on a level other than 4, 5, 6
	JournalBitmap       // --write-journal with a write-intent bitmap
	// Create(): the geometry.
	RAID6TooFew         // fewer than 4 raid devices for raid6
	RAID6TooMany        // more than 256 raid devices for raid6
	TooFewForLevel      // Count: the level number
	NoSpares            // spares on a level without redundancy
	TooManyListed       // Have: devices listed, Need: devices in the array
	NotEnoughListed     // fewer devices listed than raid+spare devices
	BitmapNotMeaningful // Level
	LayoutNeedsDevices  // Need: the devices the raid10 layout needs
	RAID10NoRedundancy  // Arg: the layout as given
	ChunkNotPowerOf2    // Have: chunk KiB, Level
	ChunkForbidden      // a chunk for raid1
	SizeBelowChunk      // --size rounds down to 0
	DuplicateDevice     // Device, Have, Need: its two positions (1-based)
	// Per device (validate_geometry1); several are gathered in CreateAborted.
	DeviceTooSmall     // Device, Have: its size in KiB
	NoFreeSpace        // Device
	SmallerThanSize    // Device, Have: free KiB, Need: --size KiB
	CreateAborted      // Fails: the devices' refusals, in device order
	AllMissing         // every device is "missing"
	TooManyDevices     // Arg: the metadata ("1.x", "0.90"), Need: its limit
	MissingUnsupported // "missing" on a level without redundancy
	// The array name and homehost.
	NoName         // neither an md device nor --name
	MDNameTry      // Arg: the md device, Alt: the suggested /dev/md/ name's tail
	MDNameInvalid  // Arg
	MDNameEmpty    // Arg
	UnsafeName     // What ("name", "homehost"), Arg, Char
	UnsafeMDDevice // Arg
	// init_super1 and the members.
	TooManyRequested       // Have: raid devices, Count: spares, Need: the 1.x limit
	BitmapChunkUnsupported // the bitmap chunk does not fit the bitmap
	WriteMetadataFailed    // Device: too small to hold a superblock
	SmallerThanComponent   // Device
	DataOffsetOverlaps     // Device, Have: data offset (sectors)
	BitmapOverData         // Device, Have: data offset (sectors)
	DataOffsetUnaligned    // Device, Have: data offset (sectors), Need: logical block size
	Inconsistent           // Device, Err
	TooManyMissing         // Level, Have: missing, Need: raid devices, Count: allowed
	RAID10CopiesMissing    // a raid10 group of copies has no member
	RAID0NeedsLayout       // members of different sizes without a raid0 layout
	ArrayEmpty             // Device ("" when none), Have: its data space in KiB
	// 0.90 metadata (validate_geometry0, init_super0).
	RAID0LayoutOn090 // raid0 with 0.90 (mdadm 4.2 always sets a raid0 layout, which 0.90 cannot store)
	TooManyFor090    // Need: the 0.90 limit (27 devices)
	TooLargeFor090   // --size of 4 TiB or more per device
	DevicesTooLarge  // Count: the level (the smallest device is 4 TiB or more)
	DataOffsetOn090  // --data-offset with 0.90
	NotSuitable      // Device: validate_geometry0 refuses it (smaller than 64 KiB)

	numKinds // the number of kinds + 1 (for tests)
)

// NumKinds is one more than the highest Kind (tests iterate 1..NumKinds-1).
const NumKinds = numKinds

// Char is the class of an unsafe character in a name (UnsafeName).
type Char int

// The classes of unsafe characters.
const (
	CharControl   Char = iota // a control character or an unprintable byte
	CharSpace                 // white space
	CharQuote                 // a quote
	CharHash                  // '#'
	CharBackslash             // the backslash
)

// Refusal is a refusal to create (or to accept a create argument): the
// reason and the data that go with it. Which fields a kind fills in is
// listed with the kinds.
type Refusal struct {
	Kind   Kind
	Arg    string // the argument as given
	Alt    string // a suggested alternative (MDNameTry)
	What   string // which value (UnsafeName: "name" or "homehost")
	Char   Char   // UnsafeName: what is wrong with it
	Device string // the member device concerned
	Level  string // the level's name
	Have   uint64
	Need   uint64
	Count  int
	Fails  []*Refusal // CreateAborted
	Err    error      // Inconsistent: the cause
}

// Error is for logs and tests only; cmd words refusals for users.
func (r *Refusal) Error() string {
	s := fmt.Sprintf("create refused (kind %d)", int(r.Kind))
	for _, f := range []struct {
		k string
		v any
		z bool
	}{
		{"arg", r.Arg, r.Arg == ""}, {"device", r.Device, r.Device == ""}, {"level", r.Level, r.Level == ""},
		{"have", r.Have, r.Have == 0}, {"need", r.Need, r.Need == 0}, {"count", r.Count, r.Count == 0},
		{"err", r.Err, r.Err == nil},
	} {
		if !f.z {
			s += fmt.Sprintf(" %s=%v", f.k, f.v)
		}
	}
	for _, f := range r.Fails {
		s += "; " + f.Error()
	}
	return s
}

func (r *Refusal) Unwrap() error { return r.Err }

// refuse returns a Refusal of kind k.
func refuse(k Kind) *Refusal { return &Refusal{Kind: k} }

// refuseArg returns a Refusal of kind k about the argument arg.
func refuseArg(k Kind, arg string) *Refusal { return &Refusal{Kind: k, Arg: arg} }

// refuseDevice returns a Refusal of kind k about a member device.
func refuseDevice(k Kind, dev string) *Refusal { return &Refusal{Kind: k, Device: dev} }

// WarningKind names a note for which mdadm asks "Continue creating
// array?".
type WarningKind int

// The warnings.
const (
	_ WarningKind = iota
	// BootNote: metadata at the start of a raid1 member, the default
	// 1.2 (a boot loader may not understand it).
	BootNote
	// LargestExceedsSize: the largest device (Device) exceeds the
	// component size (SizeKiB) by more than 1%.
	LargestExceedsSize
)

// Warning is one such note and its data; cmd words it.
type Warning struct {
	Kind    WarningKind
	Device  string
	SizeKiB uint64
}
