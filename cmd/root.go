// Package cmd holds mdtool's command line: one file per command, the
// translation of mdadm-style arguments, configuration and exit codes. It
// owns every user-visible text.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is mdtool's version string.
var Version = "0.1.0"

// Env is what a command may touch of the outside world. Tests replace it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Now returns the current time (creation/update times).
	Now func() time.Time
	// Hostname returns the system host name (mdadm's default homehost).
	Hostname func() (string, error)
}

// StdEnv is the process environment.
func StdEnv() *Env {
	return &Env{
		Stdin:    os.Stdin,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Now:      time.Now,
		Hostname: os.Hostname,
	}
}

// ExitCode is a process exit status. The named values mirror mdadm's.
type ExitCode int

const (
	// ExitOK: success.
	ExitOK ExitCode = 0
	// ExitFailure: the operation failed (mdadm's 1).
	ExitFailure ExitCode = 1
	// ExitUsage: a bad command line or a fatal problem found before
	// anything was done (mdadm's 2).
	ExitUsage ExitCode = 2
	// --detail --test's statuses: degraded (1), unusable (2), no
	// information about an array (4).
	ExitTestDegraded ExitCode = 1
	ExitTestFailed   ExitCode = 2
	ExitTestNoArray  ExitCode = 4
)

// ExitError carries a process exit status. Msg, if non-empty, is printed
// as "mdtool: Msg" on stderr; an empty Msg means the command already said
// what it had to say.
type ExitError struct {
	Code ExitCode
	Msg  string
}

func (e *ExitError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Msg
}

// exitf returns an ExitError with a formatted message.
func exitf(code ExitCode, format string, a ...any) error {
	return &ExitError{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// exitMsg returns an ExitError that prints msg as it is.
func exitMsg(code ExitCode, msg string) error {
	return &ExitError{Code: code, Msg: msg}
}

// exitStatus returns an ExitError for a command that has already said
// what it had to say; nil for ExitOK.
func exitStatus(code ExitCode) error {
	if code == ExitOK {
		return nil
	}
	return &ExitError{Code: code}
}

// usageError marks an error in the command line: mdadm exits 2 for those.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// asUsage turns an error cobra made of the command line into a
// usageError with the same text.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	return &usageError{err.Error()}
}

// Main runs mdtool with args (without the program name) and returns the
// exit status.
func Main(args []string, env *Env) int {
	root := NewRoot(env)
	args = translateMdadmArgs(root, args)
	args = expandLongPrefixes(root, args)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil && cmd.CalledAs() == "" {
		// No command was run: cobra could not find one (its only error
		// before running a command is "unknown command").
		err = asUsage(err)
	}
	return int(reportError(env.Stderr, err))
}

// reportError prints err as mdtool's last word and returns the status:
// ExitError's own, ExitUsage for a usageError (flag and argument errors
// included, see classifyCobraErrors), ExitFailure for anything else.
func reportError(w io.Writer, err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintf(w, "mdtool: %s\n", ee.Msg)
		}
		return ExitCode(ee.Code)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "mdtool: %s\n", ue.msg)
		return ExitUsage
	}
	fmt.Fprintf(w, "mdtool: %s\n", err.Error())
	return ExitFailure
}

// classifyCobraErrors makes every error cobra reports about the command
// line a usageError: flag parsing errors through the flag error function
// (inherited by every subcommand), argument-count errors by wrapping
// each command's Args validator. Unknown commands are caught in Main
// (no command was called).
func classifyCobraErrors(root *cobra.Command) {
	// cobra adds these in Execute; added now, their validators are
	// wrapped too (both calls are idempotent).
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return asUsage(err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error { return asUsage(args(c, a)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// NewRoot builds the command tree.
func NewRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "mdtool",
		Short: "mdadm-compatible md RAID tool and userspace RAID engine",
		Long: `mdtool creates, examines and runs Linux md software RAID arrays.

It reads and writes md v1.x superblocks and write-intent bitmaps exactly as
the Linux md driver and mdadm 4.2 do, and accepts mdadm's command line:
"mdtool --create /dev/md0 -l5 -n4 /dev/sd[abcd]" means the same as it does
for mdadm, as do -E, -X, --examine --scan and --zero-superblock.

Configuration: flags override MDTOOL_* environment variables, which override
the configuration file (/etc/mdtool/mdtool.yaml, or $MDTOOL_CONFIG), which
overrides the built-in defaults (mdadm's).`,
		Version:           Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return applyConfig(c, env)
		},
	}
	root.SetVersionTemplate("mdtool - v{{.Version}}\n")
	root.PersistentFlags().BoolP("verbose", "v", false, "be more verbose")
	root.PersistentFlags().BoolP("quiet", "q", false, "be less verbose")
	root.PersistentFlags().String("homehost", "", "host name used to decide whether an array is local (default: the system host name)")
	markConfigurable(root.PersistentFlags(), "homehost")
	root.AddCommand(
		newCreateCmd(env),
		newBuildCmd(env),
		newExamineCmd(env),
		newExamineBitmapCmd(env),
		newZeroSuperblockCmd(env),
		newAssembleCmd(env),
		newDetailCmd(env),
		newStopCmd(env),
		newManageCmd(env),
		newWaitCmd(env),
		newActionCmd(env),
		newGrowCmd(env),
		newQueryCmd(env),
		newIncrementalCmd(env),
		newRunCmd(env),
	)
	root.AddCommand(newReadOnlyCmds(env)...)
	root.AddCommand(
		newMonitorCmd(env),
		newReshapeMonitorCmd(env),
		newGenDocsCmd(),
	)
	// Before classifyCobraErrors: cobra's completion commands take their
	// output writer when they are made.
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	classifyCobraErrors(root)
	return root
}

// flagChanged reports whether the user set the flag on the command line.
func flagChanged(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}
