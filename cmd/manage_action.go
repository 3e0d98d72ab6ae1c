package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
)

const actionLong = `Start or stop a sync action of running arrays, as "mdadm --action=ACTION"
does by writing md's sync_action:

  check    read every stripe (or every copy) and count the sectors that
           disagree in mismatch_cnt (shown by "detail --json" and the
           metrics); nothing is written
  repair   the same, and rewrite parity or the other copies where they
           disagree
  idle     stop the running check, repair, resync or recovery (a resync or
           recovery is resumed from its checkpoint later)
  frozen   stop it and start nothing until another action is written

  mdtool --action=check /dev/md/data
  mdtool action check /dev/md/data
  mdtool wait /dev/md/data && mdtool detail --json /dev/md/data

Like mdadm, action prints nothing when it succeeds. A check or repair cannot
start while another sync (resync, recovery, check) runs: "Device or resource
busy".

mdtool additions: --sync-speed-min and --sync-speed-max set md's
sync_speed_min and sync_speed_max (KiB/s; 0 means md's defaults 1000 and
200000) of the running arrays, with or without an action:

  mdtool action --sync-speed-max 10000 /dev/md/data

EXIT STATUS
  0  done
  1  an array is not running, or refused the action
  2  bad arguments`

func newActionCmd(env *Env) *cobra.Command {
	var runDir, action string
	var minKB, maxKB uint64
	c := &cobra.Command{
		Use:   "action [--action=]{check|repair|idle|frozen} [flags] MD-DEVICE...",
		Short: "Start or stop check/repair and set sync speed limits (mdadm --action)",
		Long:  actionLong,
		RunE: func(c *cobra.Command, args []string) error {
			limits := flagChanged(c.Flags(), "sync-speed-min") || flagChanged(c.Flags(), "sync-speed-max")
			if action == "" && len(args) > 0 && validAction(args[0]) {
				action, args = args[0], args[1:]
			}
			if action != "" && !validAction(action) {
				return usagef("action must be one of idle, frozen, check, repair")
			}
			if action == "" && !limits {
				return usagef("No action given: one of idle, frozen, check, repair, or --sync-speed-min/--sync-speed-max")
			}
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			var req daemon.Request
			if limits {
				req = daemon.Request{Op: daemon.OpSyncLimits}
				if flagChanged(c.Flags(), "sync-speed-min") {
					req.SpeedMin = &minKB
				}
				if flagChanged(c.Flags(), "sync-speed-max") {
					req.SpeedMax = &maxKB
				}
			}
			rv := ExitOK
			for _, dev := range args {
				rv |= setAction(env, runDir, dev, action, limits, req)
			}
			if rv != ExitOK {
				return exitStatus(rv)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&action, "action", "", "the action: check, repair, idle or frozen")
	f.Uint64Var(&minKB, "sync-speed-min", 0, "set sync_speed_min in KiB/s (0: md's default, 1000)")
	f.Uint64Var(&maxKB, "sync-speed-max", 0, "set sync_speed_max in KiB/s (0: md's default, 200000)")
	addRunDirFlag(f, &runDir)
	return c
}

func validAction(a string) bool {
	switch a {
	case "idle", "frozen", "check", "repair":
		return true
	}
	return false
}

// setAction is mdadm's SetAction (plus the speed limits).
func setAction(env *Env, runDir, dev, action string, limits bool, lreq daemon.Request) ExitCode {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		fmt.Fprintf(env.Stderr, "mdtool: %s is no an md array\n", dev)
		return ExitFailure
	}
	cl, err := daemon.Dial(runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		fmt.Fprintf(env.Stderr, "mdtool: Couldn't open %s: No such file or directory\n", dev)
		return ExitFailure
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "mdtool: Couldn't open %s: %v\n", dev, err)
		return ExitFailure
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if limits {
		if _, err := cl.Call(ctx, lreq); err != nil {
			fmt.Fprintf(env.Stderr, "mdtool: cannot set the sync speed limits of %s: %v\n", dev, err)
			return ExitFailure
		}
	}
	if action == "" {
		return ExitOK
	}
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpAction, Action: action}); err != nil {
		_, reason := opFailure(err)
		var oe *daemon.OpError
		if errors.As(err, &oe) && oe.Code == daemon.CodeUnsupported {
			// md's action_store for a level without sync_request
			// (raid0, linear).
			reason = "Invalid argument"
		}
		// "Count" is mdadm's spelling.
		fmt.Fprintf(env.Stderr, "mdtool: Count not set action for %s to %s: %s\n", dev, action, reason)
		return ExitFailure
	}
	return ExitOK
}
