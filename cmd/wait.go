package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"mdtool/internal/daemon"
)

const waitLong = `Wait until any resync, recovery, check or repair of the given arrays has
finished, as "mdadm --wait" (-W) does.

On a terminal, wait shows the progress of each array it waits for on stderr,
as a line in the form of /proc/mdstat's (mdtool's addition):

  /dev/md/data: [====>................]  recovery = 22.1% (14532/65472) finish=0.4min speed=2000K/sec

Otherwise (output to a file or pipe) it prints nothing. Like mdadm, wait
succeeds only if it actually waited for something: an array with no sync
running returns 1. An array whose sync is frozen is waited for only briefly.

EXIT STATUS
  0  waited for every array given
  1  at least one array had nothing to wait for
  2  an array is not running`

func newWaitCmd(env *Env) *cobra.Command {
	var runDir string
	var poll time.Duration
	var progress bool
	c := &cobra.Command{
		Use:   "wait [flags] MD-DEVICE...",
		Short: "Wait for resync/recovery/check of running arrays to finish (mdadm --wait)",
		Long:  waitLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			var bar io.Writer
			if progress || isTerminal(env.Stderr) {
				bar = env.Stderr
			}
			rv := ExitOK
			for _, dev := range args {
				code := waitArray(runDir, dev, poll, bar)
				if code == ExitUsage { // mdadm's Wait: stat() of a node that an array not running lacks
					fmt.Fprintf(env.Stderr, "mdtool: stat failed for %s: No such file or directory\n", dev)
				}
				rv |= code
			}
			if rv != ExitOK {
				return exitStatus(rv)
			}
			return nil
		},
	}
	f := c.Flags()
	f.DurationVar(&poll, "poll", time.Second, "how often to ask the daemon")
	_ = f.MarkHidden("poll")
	f.BoolVar(&progress, "progress", false, "show the progress even when stderr is not a terminal")
	_ = f.MarkHidden("progress")
	addRunDirFlag(f, &runDir)
	return c
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// waitArray is mdadm's Wait(): 2 when the array is not running, 1 when
// nothing was running, 0 after waiting for a sync to end. bar, if not
// nil, gets a progress line redrawn at every poll.
func waitArray(runDir, dev string, poll time.Duration, bar io.Writer) ExitCode {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return ExitUsage
	}
	rv := ExitFailure
	frozen := 3
	drawn := false
	defer func() {
		if drawn {
			fmt.Fprintln(bar)
		}
	}()
	for {
		st, err := queryStatus(runDir, name)
		switch {
		case errors.Is(err, daemon.ErrNotRunning) && rv == 0:
			return ExitOK // stopped while we waited
		case err != nil:
			return ExitUsage
		case st.SyncAction == "" || st.SyncAction == "idle":
			return rv
		case st.SyncAction == "frozen":
			// mdadm gives a frozen array three polls to start.
			if frozen == 0 {
				return rv
			}
			frozen--
		}
		rv = ExitOK
		if bar != nil && syncRunning(st) {
			fmt.Fprintf(bar, "\r%s: %s\x1b[K", dev, progressLine(st))
			drawn = true
		}
		time.Sleep(poll)
	}
}
