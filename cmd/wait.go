package cmd

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"mdtool/engine/daemon"
)

const waitLong = `Wait until any resync, recovery, reshape or check of the given arrays has
finished, as "mdadm --wait" (-W) does.

Like mdadm, wait succeeds only if it actually waited for something: an array
with no sync running returns 1. mdtool's engine runs no background resync or
recovery yet (assemble leaves a dirty array to be resynced by the kernel or
by "check"), so today wait returns 1 for every running array.

EXIT STATUS
  0  waited for every array given
  1  at least one array had nothing to wait for
  2  an array is not running`

func newWaitCmd(env *Env) *cobra.Command {
	var runDir string
	var poll time.Duration
	c := &cobra.Command{
		Use:   "wait [flags] MD-DEVICE...",
		Short: "Wait for resync/recovery of running arrays to finish (mdadm --wait)",
		Long:  waitLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			rv := 0
			for _, dev := range args {
				rv |= waitArray(runDir, dev, poll)
			}
			if rv != 0 {
				return &ExitError{Code: rv}
			}
			return nil
		},
	}
	f := c.Flags()
	f.DurationVar(&poll, "poll", time.Second, "how often to ask the daemon")
	_ = f.MarkHidden("poll")
	addRunDirFlag(f, &runDir)
	return c
}

// waitArray is mdadm's Wait(): 2 when the array is not running, 1 when
// nothing was running, 0 after waiting for a sync to end.
func waitArray(runDir, dev string, poll time.Duration) int {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return 2
	}
	rv := 1
	for {
		st, err := queryStatus(runDir, name)
		switch {
		case errors.Is(err, daemon.ErrNotRunning) && rv == 0:
			return 0 // stopped while we waited
		case err != nil:
			return 2
		case st.SyncAction == "" || st.SyncAction == "idle" || st.SyncAction == "frozen":
			return rv
		}
		rv = 0
		time.Sleep(poll)
	}
}
