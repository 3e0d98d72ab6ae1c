package cmd

import (
	"errors"
	"fmt"
	"strings"

	"mdtool/internal/mdadm/plan"
)

// planError words a refusal of the create rules as mdadm 4.2 words it
// (mdtool's own text where mdadm has none) and chooses the exit status:
// ExitUsage for what mdadm rejects while parsing the command line,
// ExitFailure for the refusals inside Create. Continuation lines keep
// mdadm's indentation; other lines get the "mdtool: " prefix.
func planError(err error) error {
	var r *plan.Refusal
	if !errors.As(err, &r) {
		return exitMsg(ExitFailure, err.Error())
	}
	code, lines := refusalText(r)
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\n")
			if !strings.HasPrefix(l, " ") {
				b.WriteString("mdtool: ")
			}
		}
		b.WriteString(l)
	}
	return exitMsg(code, b.String())
}

// refusalText is the exit status and the lines (without the "mdtool: "
// prefix) for a refusal.
func refusalText(r *plan.Refusal) (ExitCode, []string) {
	if code, s, ok := argumentText(r); ok {
		return code, []string{s}
	}
	switch r.Kind {
	case plan.BitmapInvalid:
		return ExitUsage, []string{
			"bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'",
			fmt.Sprintf("       not '%s'", r.Arg)}
	case plan.OneDevice:
		return ExitUsage, []string{
			"'1' is an unusual number of drives for an array, so it is probably",
			"     a mistake.  If you really mean it you will need to specify --force before",
			"     setting the number of drives."}
	case plan.CreateAborted:
		var lines []string
		for _, f := range r.Fails {
			_, l := refusalText(f)
			lines = append(lines, l...)
		}
		return ExitFailure, append(lines, "create aborted")
	case plan.DeviceTooSmall:
		return ExitFailure, []string{
			fmt.Sprintf("device %s is too small (%dK) for required metadata!", r.Device, r.Have),
			fmt.Sprintf("%s is not suitable for this array.", r.Device)}
	case plan.RAID0NeedsLayout:
		return ExitFailure, []string{
			"members of different sizes need a raid0 layout, the md driver would refuse to run this array",
			"Please use --layout=original or --layout=alternate"}
	}
	if s, ok := createText(r); ok {
		return ExitFailure, []string{s}
	}
	return ExitFailure, []string{r.Error()}
}

// argumentText words the refusals of single command-line values, which
// mdadm rejects while parsing (exit 2).
func argumentText(r *plan.Refusal) (ExitCode, string, bool) {
	var s string
	switch r.Kind {
	case plan.MetadataUnsupported:
		s = fmt.Sprintf("%s metadata is not supported; use 1.0, 1.1 or 1.2", r.Arg)
	case plan.MetadataUnknown:
		s = "unrecognised metadata identifier: " + r.Arg
	case plan.InvalidLevel:
		s = "invalid raid level: " + r.Arg
	case plan.LevelUnsupported:
		s = fmt.Sprintf("level %s is not supported by mdtool (removed from Linux md)", r.Arg)
	case plan.LayoutNotUnderstood:
		s = fmt.Sprintf("layout %s not understood for %s.", r.Arg, r.Level)
	case plan.LayoutRAID10Invalid:
		s = "layout for raid10 must be 'nNN', 'oNN' or 'fNN' where NN is a number, not " + r.Arg
	case plan.LayoutNotMeaningful:
		s = fmt.Sprintf("layout not meaningful for %s arrays.", r.Level)
	case plan.InvalidSize:
		s = "invalid size: " + r.Arg
	case plan.InvalidSizeKiB:
		s = fmt.Sprintf("invalid size: %dK", r.Have)
	case plan.InvalidChunk:
		s = "invalid chunk/rounding value: " + r.Arg
	case plan.InvalidChunkKiB:
		s = fmt.Sprintf("invalid chunk/rounding value: %dK", r.Have)
	case plan.InvalidBitmapChunk:
		s = "invalid bitmap chunksize: " + r.Arg
	case plan.InvalidBitmapBytes:
		s = fmt.Sprintf("invalid bitmap chunksize: %d", r.Have)
	case plan.NameTooLong:
		s = fmt.Sprintf("name '%s' is too long, 32 chars max.", r.Arg)
	case plan.BitmapClustered:
		s = "clustered bitmaps are not supported"
	case plan.BitmapFile:
		s = "external bitmap files are not supported; use --bitmap=internal"
	case plan.InvalidSpares:
		s = fmt.Sprintf("invalid number of spare-devices: %d", r.Count)
	case plan.InvalidRaidDevices:
		s = fmt.Sprintf("invalid number of raid devices: %d", r.Count)
	case plan.JournalLevel:
		s = "--write-journal is only supported for RAID level 4/5/6."
	case plan.JournalBitmap:
		s = "--write-journal cannot be used with a write-intent bitmap (md runs one or the other)."
	case plan.SparesIncompatible:
		s = fmt.Sprintf("raid level %s is incompatible with spare-devices setting.", r.Arg)
	case plan.UnsafeName:
		s = fmt.Sprintf("invalid %s '%s': it contains %s (not allowed: control characters, white space, quotes, '#', '\\').",
			r.What, plan.EscapeName(r.Arg), unsafeCharText[r.Char])
	case plan.UnsafeMDDevice:
		s = fmt.Sprintf("invalid md device '%s': it contains a control character or an unprintable byte.", plan.EscapeName(r.Arg))
	default:
		return 0, "", false
	}
	return ExitUsage, s, true
}

var unsafeCharText = map[plan.Char]string{
	plan.CharControl:   "a control character or an unprintable byte",
	plan.CharSpace:     "white space",
	plan.CharQuote:     "a quote",
	plan.CharHash:      "'#'",
	plan.CharBackslash: "a backslash",
}

// createText words the one-line refusals inside Create (exit 1).
func createText(r *plan.Refusal) (string, bool) {
	switch r.Kind {
	case plan.NoLevel:
		return "a RAID level is needed to create an array.", true
	case plan.NoContainers:
		return "1.x metadata does not support containers", true
	case plan.DataOffsetOn10:
		return "--data-offset cannot be used with 1.0 metadata (the data would overlap the superblock)", true
	case plan.NoRaidDevices:
		return "no raid-devices specified.", true
	case plan.RAID6TooFew:
		return "at least 4 raid-devices needed for level 6", true
	case plan.RAID6TooMany:
		return "no more than 256 raid-devices supported for level 6", true
	case plan.TooFewForLevel:
		return fmt.Sprintf("at least 2 raid-devices needed for level %d", r.Count), true
	case plan.NoSpares:
		return "This level does not support spare devices", true
	case plan.TooManyListed:
		return fmt.Sprintf("You have listed more devices (%d) than are in the array(%d)!", r.Have, r.Need), true
	case plan.NotEnoughListed:
		return "You haven't given enough devices (real or missing) to create this array", true
	case plan.BitmapNotMeaningful:
		return "bitmaps not meaningful with level " + r.Level, true
	case plan.LayoutNeedsDevices:
		return fmt.Sprintf("that layout requires at least %d devices", r.Need), true
	case plan.RAID10NoRedundancy:
		return fmt.Sprintf("raid10 layout %s has no redundancy; the md driver needs at least 2 copies", r.Arg), true
	case plan.ChunkNotPowerOf2:
		return fmt.Sprintf("chunk size %dK is not a power of 2, which %s requires", r.Have, r.Level), true
	case plan.ChunkForbidden:
		return "specifying chunk size is forbidden for this level", true
	case plan.SizeBelowChunk:
		return "Size cannot be smaller than chunk.", true
	case plan.DuplicateDevice:
		return fmt.Sprintf("device %s is listed more than once (positions %d and %d)", r.Device, r.Have, r.Need), true
	case plan.NoFreeSpace:
		return "no free space left on " + r.Device, true
	case plan.SmallerThanSize:
		return fmt.Sprintf("%s is smaller than given size. %dK < %dK + metadata", r.Device, r.Have, r.Need), true
	case plan.AllMissing:
		return "Subdevs can't be all missing", true
	case plan.TooManyDevices:
		meta := r.Arg
		if meta == "" {
			meta = "1.x"
		}
		return fmt.Sprintf("Too many devices: %s metadata only supports %d", meta, r.Need), true
	case plan.MissingUnsupported:
		return "This level does not support missing devices", true
	case plan.NoName:
		return "no md device or --name given", true
	case plan.RAID0LayoutOn090:
		return "0.90 metadata does not support layouts for RAID0", true
	case plan.TooManyFor090:
		return fmt.Sprintf("0.90 metadata supports at most %d devices per array", r.Need), true
	case plan.TooLargeFor090:
		return "0.90 metadata supports at most 4 terabytes per device", true
	case plan.DevicesTooLarge:
		return fmt.Sprintf("devices too large for RAID level %d", r.Count), true
	case plan.DataOffsetOn090:
		return "data-offset not support for 0.90", true
	case plan.NotSuitable:
		return r.Device + " is not suitable for this array.", true
	case plan.MDNameTry:
		return fmt.Sprintf("%s is an invalid name for an md device.  Try /dev/md/%s", r.Arg, r.Alt), true
	case plan.MDNameInvalid:
		return r.Arg + " is an invalid name for an md device.", true
	case plan.MDNameEmpty:
		return r.Arg + " is an invalid name for an md device (empty!).", true
	case plan.TooManyRequested:
		return fmt.Sprintf("too many devices requested: %d+%d > %d", r.Have, r.Count, r.Need), true
	case plan.BitmapChunkUnsupported:
		return "Given bitmap chunk size not supported.", true
	case plan.WriteMetadataFailed:
		return "Failed to write metadata to " + r.Device, true
	case plan.SmallerThanComponent:
		return r.Device + " is smaller than the component size", true
	}
	return memberText(r)
}

// memberText words the refusals of the planned members (exit 1).
func memberText(r *plan.Refusal) (string, bool) {
	switch r.Kind {
	case plan.DataOffsetOverlaps:
		return fmt.Sprintf("data offset %d sectors on %s overlaps the superblock", r.Have, r.Device), true
	case plan.BitmapOverData:
		return fmt.Sprintf("internal bitmap does not fit before the data offset (%d sectors) on %s", r.Have, r.Device), true
	case plan.DataOffsetUnaligned:
		return fmt.Sprintf("data offset %d sectors is not a multiple of the %d-byte logical block size of %s", r.Have, r.Need, r.Device), true
	case plan.Inconsistent:
		return fmt.Sprintf("internal error: planned metadata for %s is inconsistent: %v", r.Device, r.Err), true
	case plan.TooManyMissing:
		return fmt.Sprintf("too many missing devices for %s: %d of %d raid devices missing, at most %d allowed",
			r.Level, r.Have, r.Need, r.Count), true
	case plan.RAID10CopiesMissing:
		return "too many missing devices for raid10: every copy of some data would be missing", true
	case plan.ArrayEmpty:
		dev := r.Device
		if dev == "" {
			dev = "a member"
		}
		return fmt.Sprintf("%s is too small for this array: %dK of data space gives an array of size 0", dev, r.Have), true
	}
	return "", false
}

// warningText words a note for which mdadm asks "Continue creating
// array?", as mdadm 4.2 does.
func warningText(w plan.Warning) string {
	switch w.Kind {
	case plan.BootNote:
		return "Note: this array has metadata at the start and\n" +
			"    may not be suitable as a boot device.  If you plan to\n" +
			"    store '/boot' on this device please ensure that\n" +
			"    your boot-loader understands md/v1.x metadata, or use\n" +
			"    --metadata=0.90"
	case plan.LargestExceedsSize:
		return fmt.Sprintf("largest drive (%s) exceeds size (%dK) by more than 1%%", w.Device, w.SizeKiB)
	}
	return fmt.Sprintf("warning %d", w.Kind)
}
