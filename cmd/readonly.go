package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
)

const readonlyLong = `Switch running arrays to md's read-only mode, as "mdadm --readonly" (-o)
does: writes fail (EPERM over NBD, EROFS through the FUSE file), the sync
action stops and waits, the superblocks stay clean. "readwrite" (-w,
--readwrite) makes them writable again and lets a pending resync or
recovery go on. Like md, read-only mode is refused while an NBD client is
connected. An array assembled with --readonly stays read-only.

EXIT STATUS
  0  done
  1  an array is not running or md's refusal (already read-only, not
     read-only, in use)`

func newReadOnlyCmds(env *Env) []*cobra.Command {
	mk := func(use string, ro bool, short string) *cobra.Command {
		var runDir string
		c := &cobra.Command{
			Use:   use + " MD-DEVICE...",
			Short: short,
			Long:  readonlyLong,
			RunE: func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return usagef("No devices given.")
				}
				rv := ExitOK
				for _, md := range args {
					if err := setReadOnly(env, runDir, md, ro); err != nil {
						fmt.Fprintf(env.Stderr, "mdtool: %s\n", err)
						rv = ExitFailure
					}
				}
				return exitStatus(rv)
			},
		}
		addRunDirFlag(c.Flags(), &runDir)
		return c
	}
	return []*cobra.Command{
		mk("readonly", true, "Switch running arrays to read-only mode (mdadm --readonly)"),
		mk("readwrite", false, "Make read-only arrays writable again (mdadm --readwrite)"),
	}
}

// setReadOnly is mdadm's Manage_ro for one array; the error is mdadm's
// message.
func setReadOnly(env *Env, runDir, md string, ro bool) error {
	name, err := daemon.ArrayName(md)
	if err != nil {
		return fmt.Errorf("%s does not appear to be active.", escName(md))
	}
	cl, err := daemon.Dial(runDir, name)
	if err != nil {
		return fmt.Errorf("%s does not appear to be active.", escName(md))
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, what := daemon.OpReadWrite, "writable"
	if ro {
		op, what = daemon.OpReadOnly, "readonly"
	}
	_, err = cl.Call(ctx, daemon.Request{Op: op})
	if err == nil {
		return nil
	}
	reason := err.Error()
	var oe *daemon.OpError
	if errors.As(err, &oe) {
		switch oe.Code {
		case daemon.CodeBusy:
			reason = "Device or resource busy"
		case daemon.CodeNoDevice:
			reason = "No such device or address"
		case daemon.CodeUnsupported:
			reason = "Operation not supported"
		}
	}
	return fmt.Errorf("failed to set %s for %s: %s", what, escName(md), reason)
}
