package cmd

// mdadm.conf is read by internal/mdadm/conf; these are the names the
// commands use for it.

import (
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
