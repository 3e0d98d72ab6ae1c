package cmd

import (
	"github.com/spf13/pflag"

	"mdtool/internal/daemon"
)

// addDeviceFlag adds --device (configurable: MDTOOL_DEVICE, "device:").
func addDeviceFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "device", daemon.DoorAuto, `kernel block device for the array: auto (ublk, else nbd, else none), ublk, nbd or none`)
	markConfigurable(f, "device")
}

// checkDeviceFlag refuses an unknown --device value (exit 2).
func checkDeviceFlag(v string) error {
	switch v {
	case daemon.DoorAuto, daemon.DoorUblk, daemon.DoorNBD, daemon.DoorNone:
		return nil
	}
	return usagef("bad --device %q: auto, ublk, nbd or none", v)
}

// reportDoor says which block device serves the array, or (once per
// command, not with --quiet) why "auto" found none.
func (as *assembler) reportDoor(mddev string, svc *daemon.Service) {
	if d, again := svc.Door(); d != nil {
		verb := "attached"
		if again {
			verb = "re-attached"
		}
		as.errf("%s %s as %s (%s)\n", escName(mddev), verb, d.Path(), d.Kind())
		return
	}
	if note := svc.DoorNote(); note != "" && as.verbose >= 0 && !as.doorNoted {
		as.doorNoted = true
		as.errf("%s: %s\n", escName(mddev), note)
	}
}
