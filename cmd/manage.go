package cmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"mdtool/engine/daemon"
)

const manageLong = `Change the members of a running array, as mdadm's manage mode does:

  mdtool /dev/md/data --fail /dev/loop1 --remove /dev/loop1
  mdtool manage /dev/md/data -f /dev/loop1

Every DEVICE after an operation gets that operation, until the next one:

  --fail, -f, --set-faulty   mark the member faulty: it gets no more I/O and
                             the other members' superblocks record it (md
                             refuses to fail the last copy of the data)
  --remove, -r               remove a faulty or spare member
  --add, -a, --re-add        add a device (as a spare, or back into its slot)

The array is reached through its daemon's control socket in the run directory
(--run-dir, MDTOOL_RUN_DIR, default /run/mdtool).

Not yet possible with mdtool's engine: --remove (the member stays listed as
faulty until the array is stopped), failing a spare, and --add/--re-add
(they need a rebuild). These report an error and change nothing.

EXIT STATUS
  0  every operation was done
  1  an operation failed (the ones after it were not tried)
  2  bad arguments; with --test: nothing was changed`

func newManageCmd(env *Env) *cobra.Command {
	var runDir string
	c := &cobra.Command{
		Use:                "manage MD-DEVICE {--fail|--remove|--add|--re-add} DEVICE...",
		Short:              "Fail, remove or add members of a running array (mdadm manage mode)",
		Long:               manageLong,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			return runManage(env, c, args, runDir)
		},
	}
	f := c.Flags()
	f.BoolP("fail", "f", false, "mark the following devices faulty")
	f.Bool("set-faulty", false, "same as --fail")
	f.BoolP("remove", "r", false, "remove the following (faulty or spare) devices")
	f.BoolP("add", "a", false, "add the following devices")
	f.Bool("re-add", false, "add the following devices back into their slots")
	f.BoolP("test", "t", false, "exit status 2 when nothing was changed")
	addRunDirFlag(f, &runDir)
	return c
}

type manageOp struct {
	op  string // daemon op
	dev string // as given (for messages)
	abs string // absolute path (for the daemon)
}

func runManage(env *Env, c *cobra.Command, args []string, runDir string) error {
	var mddev string
	var ops []manageOp
	cur := ""
	verbose, test := 0, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--fail", "-f", "--set-faulty":
			cur = daemon.OpFail
		case "--remove", "-r":
			cur = daemon.OpRemove
		case "--add", "-a", "--add-spare":
			cur = daemon.OpAdd
		case "--re-add":
			cur = daemon.OpReAdd
		case "--verbose", "-v":
			verbose = 1
		case "--quiet", "-q":
			verbose = -1
		case "--test", "-t":
			test = true
		case "--help", "-h":
			return c.Help()
		case "--run-dir":
			if i+1 >= len(args) {
				return usagef("--run-dir needs a directory")
			}
			i++
			runDir = args[i]
		default:
			if v, ok := strings.CutPrefix(a, "--run-dir="); ok {
				runDir = v
				continue
			}
			if strings.HasPrefix(a, "-") && a != "-" {
				return usagef("unknown option %s in manage mode", a)
			}
			if mddev == "" {
				mddev = a
				continue
			}
			if cur == "" {
				return usagef("%s: an operation (--fail, --remove, --add, --re-add) must come before the devices", a)
			}
			dev := a
			if !filepath.IsAbs(dev) {
				if abs, err := filepath.Abs(dev); err == nil {
					dev = abs
				}
			}
			ops = append(ops, manageOp{op: cur, dev: a, abs: dev})
		}
	}
	if mddev == "" {
		return usagef("an md device must be given in manage mode")
	}
	if len(ops) == 0 {
		return usagef("no devices given for %s", mddev)
	}
	name, err := daemon.ArrayName(mddev)
	if err != nil {
		return exitf(1, "%s does not appear to be an md device", mddev)
	}
	cl, err := daemon.Dial(runDir, name)
	if errors.Is(err, daemon.ErrNotRunning) {
		return exitf(1, "%s does not appear to be active.", mddev)
	}
	if err != nil {
		return exitf(1, "cannot reach the daemon of %s: %v", mddev, err)
	}
	defer cl.Close()
	count := 0
	for _, op := range ops {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := cl.Call(ctx, daemon.Request{Op: op.op, Device: op.abs})
		cancel()
		if err != nil {
			fmt.Fprintf(env.Stderr, "mdtool: %s\n", manageError(op, mddev, err))
			return &ExitError{Code: 1}
		}
		count++
		if verbose >= 0 {
			switch op.op {
			case daemon.OpFail:
				fmt.Fprintf(env.Stderr, "mdtool: set %s faulty in %s\n", op.dev, mddev)
			case daemon.OpRemove:
				fmt.Fprintf(env.Stderr, "mdtool: hot removed %s from %s\n", op.dev, mddev)
			case daemon.OpAdd:
				fmt.Fprintf(env.Stderr, "mdtool: added %s\n", op.dev)
			case daemon.OpReAdd:
				fmt.Fprintf(env.Stderr, "mdtool: re-added %s\n", op.dev)
			}
		}
	}
	if test && count == 0 {
		return &ExitError{Code: 2}
	}
	return nil
}

// manageError words a failed operation as mdadm does.
func manageError(op manageOp, mddev string, err error) string {
	var oe *daemon.OpError
	code := daemon.CodeFailed
	if errors.As(err, &oe) {
		code = oe.Code
	}
	reason := err.Error()
	switch code {
	case daemon.CodeBusy:
		reason = "Device or resource busy"
	case daemon.CodeNotMember:
		reason = "No such device"
		if op.op == daemon.OpRemove {
			reason = "No such device or address"
		}
	case daemon.CodeUnsupported:
		return fmt.Sprintf("%s: --%s is not supported by mdtool yet: %s", op.dev, op.op, reason)
	}
	switch op.op {
	case daemon.OpFail:
		return fmt.Sprintf("set device faulty failed for %s:  %s", op.dev, reason)
	case daemon.OpRemove:
		return fmt.Sprintf("hot remove failed for %s: %s", op.dev, reason)
	}
	return fmt.Sprintf("add new device failed for %s as %s: %s", op.dev, mddev, reason)
}
