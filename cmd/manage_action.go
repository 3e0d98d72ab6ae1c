package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"mdtool/engine"
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

--journal-mode=write-through|write-back sets md's journal_mode of raid4/5/6
arrays with a write journal (--write-journal), with or without an action,
as "echo write-back > /sys/block/md0/md/journal_mode" does. In write-back
mode a write completes once it is in the journal; the members are written
later. Every start begins in write-through mode. md refuses write-back on a
degraded array ("Invalid argument") and any mode on an array without a
journal ("No such device"); "detail --json" shows the mode as
"journal_mode":

  mdtool action --journal-mode=write-back /dev/md/data

EXIT STATUS
  0  done
  1  an array is not running, or refused the action or the setting
  2  bad arguments`

func newActionCmd(env *Env) *cobra.Command {
	var runDir, action, journalMode string
	var minKB, maxKB uint64
	c := &cobra.Command{
		Use:   "action [--action=]{check|repair|idle|frozen} [flags] MD-DEVICE...",
		Short: "Start or stop check/repair, set sync speed limits and the journal mode (mdadm --action)",
		Long:  actionLong,
		RunE: func(c *cobra.Command, args []string) error {
			limits := flagChanged(c.Flags(), "sync-speed-min") || flagChanged(c.Flags(), "sync-speed-max")
			if action == "" && len(args) > 0 && validAction(args[0]) {
				action, args = args[0], args[1:]
			}
			if action != "" && !validAction(action) {
				return usagef("action must be one of idle, frozen, check, repair")
			}
			journal := flagChanged(c.Flags(), "journal-mode")
			if journal {
				if _, err := engine.ParseJournalMode(journalMode); err != nil {
					return usagef("--journal-mode must be write-through or write-back, not %q", journalMode)
				}
			}
			if action == "" && !limits && !journal {
				return usagef("No action given: one of idle, frozen, check, repair, or --sync-speed-min/--sync-speed-max/--journal-mode")
			}
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			var set actionSettings
			if limits {
				set.limits = &daemon.Request{Op: daemon.OpSyncLimits}
				if flagChanged(c.Flags(), "sync-speed-min") {
					set.limits.SpeedMin = &minKB
				}
				if flagChanged(c.Flags(), "sync-speed-max") {
					set.limits.SpeedMax = &maxKB
				}
			}
			if journal {
				set.journal = &daemon.Request{Op: daemon.OpJournalMode, JournalMode: journalMode}
			}
			rv := ExitOK
			for _, dev := range args {
				rv |= setAction(env, runDir, dev, action, set)
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
	f.StringVar(&journalMode, "journal-mode", "", "set md's journal_mode of a journaled raid4/5/6: write-through or write-back")
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

// actionSettings are action's mdtool additions: the requests that set the
// speed limits and the journal mode (nil: not given).
type actionSettings struct {
	limits, journal *daemon.Request
}

// setAction is mdadm's SetAction (plus the speed limits and the journal
// mode, set before the action).
func setAction(env *Env, runDir, dev, action string, set actionSettings) ExitCode {
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
	if set.limits != nil {
		if _, err := cl.Call(ctx, *set.limits); err != nil {
			fmt.Fprintf(env.Stderr, "mdtool: cannot set the sync speed limits of %s: %v\n", dev, err)
			return ExitFailure
		}
	}
	if set.journal != nil {
		if _, err := cl.Call(ctx, *set.journal); err != nil {
			// md's journal_mode store: EINVAL (write-back on a degraded
			// array), ENODEV (no journal), worded as a sysfs write's.
			_, reason := opFailure(err)
			fmt.Fprintf(env.Stderr, "mdtool: cannot set journal_mode of %s: %s\n", dev, reason)
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
