// Package cmd holds mdtool's command line: one file per command, the
// translation of mdadm-style arguments, configuration and exit codes. It
// owns every user-visible text.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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

// ExitError carries a process exit status. Msg, if non-empty, is printed
// as "mdtool: Msg" on stderr; an empty Msg means the command already said
// what it had to say.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Msg
}

// exitf returns an ExitError with a formatted message.
func exitf(code int, format string, a ...any) error {
	return &ExitError{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// usageError marks an error in the command line: mdadm exits 2 for those.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// Main runs mdtool with args (without the program name) and returns the
// exit status.
func Main(args []string, env *Env) int {
	root := NewRoot(env)
	args = translateMdadmArgs(root, args)
	args = expandLongPrefixes(root, args)
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.Execute()
	return reportError(env.Stderr, err)
}

func reportError(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Msg != "" {
			fmt.Fprintf(w, "mdtool: %s\n", ee.Msg)
		}
		return ee.Code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "mdtool: %s\n", ue.msg)
		return 2
	}
	// cobra's own flag and argument errors are usage errors too.
	msg := err.Error()
	fmt.Fprintf(w, "mdtool: %s\n", msg)
	if isCobraUsage(msg) {
		return 2
	}
	return 1
}

func isCobraUsage(msg string) bool {
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "unknown command",
		"invalid argument", "flag needs an argument", "accepts ", "requires at least",
		"bad flag syntax", "if any flags in the group"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%s", err.Error()) })
	root.PersistentFlags().BoolP("verbose", "v", false, "be more verbose")
	root.PersistentFlags().BoolP("quiet", "q", false, "be less verbose")
	root.PersistentFlags().String("homehost", "", "host name used to decide whether an array is local (default: the system host name)")
	markConfigurable(root.PersistentFlags(), "homehost")
	root.AddCommand(
		newCreateCmd(env),
		newExamineCmd(env),
		newExamineBitmapCmd(env),
		newZeroSuperblockCmd(env),
		newAssembleCmd(env),
		newDetailCmd(env),
		newStopCmd(env),
		newManageCmd(env),
		newWaitCmd(env),
		newActionCmd(env),
		newMonitorCmd(env),
		newGenDocsCmd(),
	)
	return root
}

// flagChanged reports whether the user set the flag on the command line.
func flagChanged(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}
