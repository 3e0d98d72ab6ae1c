package cmd

// mdadm.conf is read by internal/mdadm/conf; these are the names the
// commands use for it.

import (
	"fmt"

	mdconf "mdtool/internal/mdadm/conf"
	"mdtool/internal/mdadm/plan"
)

// The mdadm.conf locations read when no --config is given (tests point
// them elsewhere).
var (
	DefaultMdadmConf    = mdconf.DefaultPaths.File
	DefaultMdadmConfDir = mdconf.DefaultPaths.Dir
	AltMdadmConf        = mdconf.DefaultPaths.AltFile
	AltMdadmConfDir     = mdconf.DefaultPaths.AltDir
)

// MdadmConf is a parsed mdadm.conf; ConfArray one of its ARRAY lines.
type (
	MdadmConf = mdconf.Conf
	ConfArray = mdconf.Array
)

// LevelUnset marks a level that was not given (mdadm's UnSet).
const LevelUnset = mdconf.LevelUnset

// LoadMdadmConf reads mdadm.conf as mdadm 4.2 does (mdconf.Load): path ""
// reads the default locations above, "partitions" and "none" read nothing.
func LoadMdadmConf(path string) (*MdadmConf, error) {
	return mdconf.Load(path, mdconf.Paths{
		File: DefaultMdadmConf, Dir: DefaultMdadmConfDir,
		AltFile: AltMdadmConf, AltDir: AltMdadmConfDir,
	})
}

// ResolveHomeHost is plan.ResolveHomehost (mdadm 4.2's rule) with
// mdadm.conf's HOMEHOST word taken from conf (nil: no mdadm.conf).
func ResolveHomeHost(flag string, given bool, conf *MdadmConf, hostname func() (string, error)) string {
	var word *string
	if conf != nil && conf.HomeHostSet {
		word = &conf.HomeHost
	}
	return plan.ResolveHomehost(flag, given, word, hostname)
}

// parseUUIDText is mdadm's parse_uuid as a found/not-found answer.
func parseUUIDText(s string) ([16]byte, bool) { return mdconf.ParseUUIDText(s) }

// mapDevFromDev is mdadm's map_dev (mdconf.MapDev).
func mapDevFromDev(major, minor uint32) string { return mdconf.MapDev(major, minor) }

// confWarningText words an mdadm.conf complaint as mdadm 4.2's config.c
// does (without the "mdadm: " prefix; "unreconised" is mdadm's spelling).
func confWarningText(w mdconf.Warning) string {
	switch w.Kind {
	case mdconf.UnknownKeyword:
		return "Unknown keyword " + w.Word
	case mdconf.DeviceLineWord:
		return "unreconised word on DEVICE line: " + w.Word
	case mdconf.ArrayOneDevice:
		return fmt.Sprintf("only give one device per ARRAY line: %s and %s", w.Word, w.Other)
	case mdconf.ArrayInvalidName:
		return w.Word + " is an invalid name for an md device - ignored."
	case mdconf.ArrayUUIDTwice:
		return "only specify uuid once, " + w.Word + " ignored."
	case mdconf.ArrayBadUUID:
		return "bad uuid: " + w.Word
	case mdconf.ArraySuperMinorTwice:
		return "only specify super-minor once, " + w.Word + " ignored."
	case mdconf.ArrayBadSuperMinor:
		return "invalid super-minor number: " + w.Word
	case mdconf.ArrayNameTwice:
		return "only specify name once, " + w.Word + " ignored."
	case mdconf.ArrayNameTooLong:
		return "name too long, ignoring " + w.Word
	case mdconf.ArrayBitmapTwice:
		return "only specify bitmap file once. " + w.Word + " ignored"
	case mdconf.ArrayDevicesTwice:
		return "only specify devices once (use a comma separated list). " + w.Word + " ignored"
	case mdconf.ArraySpareGroupTwice:
		return "only specify one spare group per array. " + w.Word + " ignored."
	case mdconf.ArrayMetadataUnknown:
		return "metadata format " + w.Word + " unknown, ignored."
	case mdconf.ArrayWord:
		return "unrecognised word on ARRAY line: " + w.Word
	case mdconf.ArrayNoIdentity:
		return "ARRAY line " + w.Word + " has no identity information."
	case mdconf.CreateMissingOwner:
		return "missing owner name"
	case mdconf.CreateMissingGroup:
		return "missing group name"
	case mdconf.CreateMissingMode:
		return "missing CREATE mode"
	case mdconf.CreateBadMode:
		return "unrecognised CREATE mode " + w.Word
	case mdconf.CreateMetadataUnknown:
		return "metadata format " + w.Word + " unknown, ignoring"
	case mdconf.CreateWord:
		return "unrecognised word on CREATE line: " + w.Word
	}
	return fmt.Sprintf("mdadm.conf: complaint %d about %q", int(w.Kind), w.Word)
}
