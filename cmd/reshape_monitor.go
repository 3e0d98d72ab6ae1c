package cmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
)

// mdadm 4.2's grow forks a child that watches a restriping reshape and,
// when it ends, imposes the level the user asked for (a raid6 -> raid5
// that first restripes to a parity-last layout). On the in-place path
// (--backup-file; without systemd) that child prints "level of MD changed
// to raidN" on the stderr it shares with the command that started it,
// long after that command returned (the child of a reshape that moves
// data_offset has /dev/null as its stderr). In mdtool the daemon
// changes the level; grow starts this hidden command in the background
// with its own stderr to say so at the same moment, as mdadm's child does.

const reshapeMonitorName = "reshape-monitor"

func newReshapeMonitorCmd(env *Env) *cobra.Command {
	var runDir string
	var level int
	c := &cobra.Command{
		Use:    reshapeMonitorName + " --level N MD-DEVICE",
		Short:  "wait for a reshape to end and report the level change after it (started by grow)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if watchFinalLevel(runDir, args[0], level, 200*time.Millisecond) {
				name, _ := plan.LevelName(level)
				fmt.Fprintf(env.Stderr, "mdtool: level of %s changed to %s\n", args[0], name)
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&level, "level", 0, "the level the daemon imposes when the reshape ends")
	addRunDirFlag(f, &runDir)
	return c
}

// watchFinalLevel polls the array's daemon until its level is level
// (true), the array stops, or no reshape has run for 50 polls without the
// level changing (false: the daemon could not impose it).
func watchFinalLevel(runDir, md string, level int, poll time.Duration) bool {
	name, err := daemon.ArrayName(md)
	if err != nil {
		return false
	}
	for idle := 0; idle < 50; {
		st, err := queryStatus(runDir, name)
		switch {
		case errors.Is(err, daemon.ErrNotRunning):
			return false
		case err != nil:
			idle++
		case st.Level == level:
			return true
		case st.SyncAction == "reshape" || st.SyncAction == "frozen":
			idle = 0
		default:
			idle++
		}
		time.Sleep(poll)
	}
	return false
}

// startReshapeMonitor starts reshape-monitor for md in the background,
// sharing stderr (when it is a file: a terminal, a pipe, a log).
func startReshapeMonitor(env *Env, o *growOptions, md string, level int) {
	stderr, ok := env.Stderr.(*os.File)
	if !ok || o.verbose < 0 {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	args := []string{reshapeMonitorName, "--level", fmt.Sprint(level)}
	if o.runDir != "" {
		args = append(args, "--run-dir", o.runDir)
	}
	cmd := exec.Command(exe, append(args, md)...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return
	}
	_ = cmd.Process.Release()
}
