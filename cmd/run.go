package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
)

const runLong = `Start arrays that "mdtool incremental" (mdadm -I) has collected but not
started, as "mdadm --run MD-DEVICE" (-R) does: the members that arrived
are assembled as they are, degraded if some are missing ("started array
/dev/md/NAME"). An array with a write journal whose journal has not
arrived starts read-only, as md starts it. An array that already runs is
left alone.

EXIT STATUS
  0  started (or already running)
  1  not an array -I collected, or it failed to start`

func newRunCmd(env *Env) *cobra.Command {
	var runDir string
	c := &cobra.Command{
		Use:   "run MD-DEVICE...",
		Short: "Start arrays that incremental assembly collected (mdadm --run)",
		Long:  runLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("No devices given.")
			}
			rv := ExitOK
			quiet, _ := c.Flags().GetBool("quiet")
			for _, md := range args {
				if err := runWaiting(env, runDir, md, quiet); err != nil {
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

// runWaiting is Manage_run (IncrementalScan for one array): start the
// members -I collected for md.
func runWaiting(env *Env, runDir, md string, quiet bool) error {
	name, err := daemon.ArrayName(md)
	if err != nil {
		return fmt.Errorf("error opening %s: No such file or directory", escName(md))
	}
	if cl, err := daemon.Dial(runDir, name); err == nil {
		cl.Close()
		return nil // active: IncrementalScan skips it
	}
	unlock, err := lockMap(runDir)
	if err != nil {
		return errors.New("failed to get exclusive lock on mapfile")
	}
	defer unlock()
	e := findMapEntryNamed(runDir, name)
	paths := []string(nil)
	if e != nil {
		paths = readMemberList(runDir, e.name)
	}
	if len(paths) == 0 {
		return fmt.Errorf("error opening %s: No such file or directory", escName(md))
	}
	dropMapEntry(runDir, e.name)
	in := &incr{env: env, o: &incrementalOptions{runDir: runDir}}
	if err := in.start(e.path, e.name, paths); err != nil {
		_ = writeMemberList(runDir, e.name, paths)
		_ = putMapEntry(runDir, *e)
		return fmt.Errorf("failed to start array %s: %v", escName(e.path), err)
	}
	if !quiet {
		fmt.Fprintf(env.Stderr, "mdtool: started array %s\n", escName(e.path))
	}
	return nil
}
