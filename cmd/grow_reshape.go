package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"mdtool/internal/daemon"
)

// growReshape changes the level, layout, chunk or number of devices of a
// striped array (restriping). Supported: --raid-devices=N growing a
// raid4/5/6 onto its spares, with data_offset moved down as mdadm 4.2
// does when the members have room before their data (no backup file);
// the daemon's engine then moves the data online.
func growReshape(env *Env, o *growOptions, md string) error {
	if o.level != "" {
		return growLevel(env, o, md) // grow_level.go
	}
	if o.level != "" || o.chunk != "" || o.layout != "" || o.raidDevices == 0 || o.size != "" || len(o.add) > 0 {
		return exitf(ExitFailure, "reshape (changing the level, layout, chunk size, or the number of devices together with other changes) is not supported yet")
	}
	name, err := daemon.ArrayName(md)
	if err != nil {
		return exitf(ExitFailure, "%s is not an md array", md)
	}
	cl, err := daemon.Dial(o.runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		return exitf(ExitFailure, "Cannot open %s: No such file or directory", md)
	}
	if err != nil {
		return exitf(ExitFailure, "Cannot open %s: %v", md, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		return exitf(ExitFailure, "Cannot get array information for %s: %v", md, err)
	}
	if st.Level != 4 && st.Level != 5 && st.Level != 6 {
		return exitf(ExitFailure, "reshape of this level is not supported yet")
	}
	if o.raidDevices == st.RaidDisks {
		if o.verbose >= 0 {
			fmt.Fprintf(env.Stderr, "mdtool: %s: no change requested\n", md)
		}
		return nil
	}
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpReshape, RaidDisks: o.raidDevices}); err != nil {
		var oe *daemon.OpError
		if errors.As(err, &oe) && oe.Code == daemon.CodeBusy {
			return exitf(ExitFailure, "Cannot set device shape for %s: Device or resource busy", md)
		}
		return exitf(ExitFailure, "Cannot set device shape for %s: %v", md, err)
	}
	return nil
}
