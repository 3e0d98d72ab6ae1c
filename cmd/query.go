package cmd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
	"mdtool/ioctl"
	"mdtool/superblock"
)

const queryLong = `Say briefly what each DEVICE is, as "mdadm --query" (-Q) does: a running
array (its size, level, devices and spares), or not an md array; and, for a
device holding an md superblock, which device of which array it is and
whether that array runs:

  /dev/md/data: 2.00GiB raid5 3 devices, 0 spares. Use mdadm --detail for more detail.
  d0.img: is not an md array
  d0.img: device 0 in 3 device inactive raid5 array.  Use mdadm --examine for more detail.
  d0.img: device 0 in 3 device active raid5 /dev/md/data.  Use mdadm --examine for more detail.

Running arrays are the daemons of the run directory (--run-dir,
MDTOOL_RUN_DIR, default /run/mdtool), which stand for mdadm's map file.

EXIT STATUS
  0  every device was described
  1  a device could not be opened
  2  no device given`

func newQueryCmd(env *Env) *cobra.Command {
	var runDir string
	c := &cobra.Command{
		Use:   "query DEVICE...",
		Short: "Say briefly whether devices are md arrays or members (mdadm --query)",
		Long:  queryLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			rv := ExitOK
			for _, dev := range args {
				if code := runQuery(env, runDir, dev); code != ExitOK {
					rv = code
				}
			}
			return exitStatus(rv)
		},
	}
	addRunDirFlag(c.Flags(), &runDir)
	return c
}

// runQuery is mdadm's Query for one device.
func runQuery(env *Env, runDir, dev string) ExitCode {
	if st := queryArray(runDir, dev); st != nil {
		spares := 0
		if d, err := newDetailView(st, ""); err == nil {
			spares = d.spare
		}
		plural := "s"
		if spares == 1 {
			plural = ""
		}
		fmt.Fprintf(env.Stdout, "%s: %s %s %d devices, %d spare%s. Use mdadm --detail for more detail.\n",
			escName(dev), humanSizeBrief(st.Size, prefixIEC), levelNameOrNull(st.Level), st.RaidDisks, spares, plural)
		return ExitOK
	}
	p, err := probeDevice(dev)
	if err != nil {
		var oe *openError
		if errors.As(err, &oe) && errors.Is(oe.err, ioctl.ErrNotMember) {
			// mdadm opens a directory or a character device too (and
			// finds no md array there).
			fmt.Fprintf(env.Stdout, "%s: is not an md array\n", escName(dev))
			return ExitOK
		}
		fmt.Fprintf(env.Stderr, "mdtool: %s\n", err)
		return ExitFailure
	}
	defer p.close()
	fmt.Fprintf(env.Stdout, "%s: is not an md array\n", escName(dev))
	var number, raidDisks, level int
	var uuid [16]byte
	switch p.kind {
	case kindV1:
		sb := p.v1.sb
		number, raidDisks, level = int(sb.DevNumber), int(sb.RaidDisks), int(sb.Level)
		uuid = sb.SetUUID
	case kindV090:
		sb := p.v0.sb
		number, raidDisks, level = int(sb.ThisDisk.Number), int(sb.RaidDisks), int(sb.Level)
		uuid = sb.UUID()
	default:
		return ExitOK
	}
	activity, mddev := "inactive", "array"
	if st := arrayByUUID(runDir, uuid); st != nil {
		mddev = escName(st.Device)
		activity = "mismatch"
		for _, m := range st.Members {
			if m.DevNumber == number && m.State != "missing" && sameFile(m.Path, dev) {
				activity = "active"
			}
		}
	}
	fmt.Fprintf(env.Stdout, "%s: device %d in %d device %s %s %s.  Use mdadm --examine for more detail.\n",
		escName(dev), number, raidDisks, activity, levelNameOrNull(level), mddev)
	return ExitOK
}

// queryArray returns the status of the array dev names when a daemon
// serves it: dev is an md device name (/dev/mdN, /dev/md/NAME) or names
// no file.
func queryArray(runDir, dev string) *daemon.Status {
	if _, err := os.Stat(dev); err == nil && !strings.HasPrefix(dev, "/dev/md") {
		return nil
	}
	name, err := daemon.ArrayName(dev)
	if err != nil {
		return nil
	}
	st, err := queryStatus(runDir, name)
	if err != nil {
		return nil
	}
	return st
}

// arrayByUUID is mdadm's map_by_uuid over the running daemons.
func arrayByUUID(runDir string, uuid [16]byte) *daemon.Status {
	names, _ := daemon.Names(runDir)
	for _, n := range names {
		st, err := queryStatus(runDir, n)
		if err != nil {
			continue
		}
		sb, _ := superblock.Parse(padSuper(st.Superblock))
		if sb != nil && sb.SetUUID == uuid {
			return st
		}
	}
	return nil
}

// sameFile reports whether paths a and b name the same file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
