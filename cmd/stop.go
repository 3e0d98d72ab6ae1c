package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
)

const stopLong = `Stop running arrays, as "mdadm --stop" (-S) stops them.

MD-DEVICE names an array served by an mdtool daemon (/dev/md/NAME, /dev/mdN,
NAME or mdN); --scan stops every array in the run directory (--run-dir,
MDTOOL_RUN_DIR, default /run/mdtool). The daemon finishes the requests in
flight, flushes, marks the superblocks clean exactly as the kernel does when
an array stops (so that mdadm and the kernel can assemble the members
afterwards), releases the members and exits. stop returns when the daemon
is gone.

Like mdadm, stop refuses while the array is in use: its block device
(/dev/nbdN, /dev/ublkbN, see assemble --device) is mounted or open
exclusively, an NBD client is connected or the FUSE file is open (e.g.
attached to a loop device). --force (or SIGTERM to the daemon) stops it
regardless; its users then get I/O errors. A clean stop flushes the block
device, detaches it from the kernel, removes the /dev/md/NAME link, then
writes the superblocks clean.

EXIT STATUS
  0  every array was stopped
  1  an array is not running, is in use, or could not be stopped`

func newStopCmd(env *Env) *cobra.Command {
	var scan, force bool
	var runDir string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "stop [flags] MD-DEVICE...",
		Short: "Stop running arrays (mdadm --stop)",
		Long:  stopLong,
		RunE: func(c *cobra.Command, args []string) error {
			return runStop(env, args, scan, force, runDir, timeout, verbosityOf(c))
		},
	}
	f := c.Flags()
	f.BoolVarP(&scan, "scan", "s", false, "stop every running array")
	f.BoolVarP(&force, "force", "f", false, "stop even while the array is in use (mounted, open, NBD clients): its users get I/O errors")
	f.DurationVar(&timeout, "timeout", stopTimeout, "how long to wait for a daemon to finish")
	addRunDirFlag(f, &runDir)
	return c
}

func runStop(env *Env, args []string, scan, force bool, runDir string, timeout time.Duration, verbose int) error {
	if scan && len(args) > 0 {
		return exitf(ExitFailure, "--stop not meaningful with both a --scan assembly and a device name.")
	}
	if !scan && len(args) == 0 {
		return usagef("No devices given.")
	}
	devs := args
	if scan {
		names, err := daemon.Names(runDir)
		if err != nil {
			return exitf(ExitFailure, "%v", err)
		}
		for _, n := range names {
			dev := n
			if st, err := queryStatus(runDir, n); err == nil {
				dev = st.Device
			}
			devs = append(devs, dev)
		}
	}
	rv := ExitOK
	for _, raw := range devs {
		dev := escName(raw) // as shown; raw names the array
		if err := stopArray(runDir, raw, force, timeout); err != nil {
			var oe *daemon.OpError
			switch {
			case errors.As(err, &oe) && oe.Code == daemon.CodeBusy:
				if verbose >= 0 {
					fmt.Fprintf(env.Stderr, "mdtool: Cannot get exclusive access to %s:Perhaps a running process, mounted filesystem or active volume group?\n", dev)
				}
			case errors.Is(err, daemon.ErrNotRunning):
				fmt.Fprintf(env.Stderr, "mdtool: error opening %s: No such file or directory\n", dev)
			default:
				if verbose >= 0 {
					fmt.Fprintf(env.Stderr, "mdtool: failed to stop array %s: %v\n", dev, err)
				}
			}
			rv = ExitFailure
			continue
		}
		if verbose > 0 || (verbose == 0 && !scan) {
			// --stop --scan says nothing of the arrays it stopped
			// unless -v (mdadm's stop_scan retries quietly).
			fmt.Fprintf(env.Stderr, "mdtool: stopped %s\n", dev)
		}
	}
	return exitStatus(rv)
}

// stopArray asks the daemon of dev to stop and waits until it released
// the array.
func stopArray(runDir, dev string, force bool, timeout time.Duration) error {
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return err
	}
	cl, err := daemon.Dial(runDir, name)
	if n, ok := daemon.NameForDevice(runDir, dev); err != nil && ok {
		name = n // the block device (/dev/nbd0) or a link to it
		cl, err = daemon.Dial(runDir, name)
	}
	if n, ok := namedKernelAlias(runDir, dev); err != nil && ok {
		name = n // md_NAME: /dev/md/NAME of mdadm's CREATE names=yes
		cl, err = daemon.Dial(runDir, name)
	}
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpStop, Force: force}); err != nil {
		return err
	}
	p := daemon.PathsFor(runDir, name)
	for daemon.Held(p) {
		if ctx.Err() != nil {
			return fmt.Errorf("the daemon did not exit within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
