package cmd

import (
	"errors"

	"mdtool/internal/daemon"
)

// manageNothing is manage mode with an md device and no member (mdadm
// --remove /dev/mdX, as provisioning scripts run it after --stop): mdadm
// 4.2 opens the array (open_mddev) and then has nothing to do, so it
// exits 0 for a running array and 1 with "error opening" for one that is
// not.
func manageNothing(runDir, mddev string) error {
	name, err := daemon.ArrayName(mddev)
	if err != nil {
		return exitf(ExitFailure, "%s does not appear to be an md device", mddev)
	}
	cl, err := daemon.Dial(runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		return exitf(ExitFailure, "error opening %s: No such file or directory", mddev)
	}
	if err != nil {
		return exitf(ExitFailure, "cannot reach the daemon of %s: %v", mddev, err)
	}
	cl.Close()
	return nil
}
