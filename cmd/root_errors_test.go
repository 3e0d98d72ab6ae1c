package cmd

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCobraUsageErrors runs command lines cobra itself rejects through the
// real command tree: each must print cobra's text once and exit 2, and the
// error must reach reportError as a usageError (classified by type).
func TestCobraUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--create", "--frobnicate"}, "mdtool: unknown flag: --frobnicate\n"},
		{"unknown flag on a subcommand", []string{"stop", "--frob"}, "mdtool: unknown flag: --frob\n"},
		{"unknown shorthand", []string{"examine", "-Z"}, "mdtool: unknown shorthand flag: 'Z' in -Z\n"},
		{"missing flag argument", []string{"create", "-n"}, "mdtool: flag needs an argument: 'n' in -n\n"},
		{"bad value", []string{"examine", "--brief=x"},
			"mdtool: invalid argument \"x\" for \"-b, --brief\" flag: strconv.ParseBool: parsing \"x\": invalid syntax\n"},
		{"unknown command", []string{"frobnicate"}, "mdtool: unknown command \"frobnicate\" for \"mdtool\"\n"},
		{"too few args", []string{"zero-superblock"}, "mdtool: requires at least 1 arg(s), only received 0\n"},
		{"wrong number of args", []string{"gendocs", "x"}, "mdtool: accepts 2 arg(s), received 1\n"},
		{"args to cobra's completion", []string{"completion", "bash", "x"}, "mdtool: unknown command \"x\" for \"mdtool completion bash\"\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
				Now: time.Now, Hostname: func() (string, error) { return "host", nil }}
			if code := Main(tt.args, env); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if got := stderr.String(); got != tt.want {
				t.Errorf("stderr %q, want %q", got, tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestReportErrorByType: the status comes from the error's type, never
// from its text: a plain error that reads like a cobra message is a
// failure (1), a usageError is 2, an ExitError keeps its code.
func TestReportErrorByType(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want ExitCode
		text string
	}{
		{nil, ExitOK, ""},
		{errors.New("write /dev/x: invalid argument"), ExitFailure, "mdtool: write /dev/x: invalid argument\n"},
		{errors.New("unknown flag: --x"), ExitFailure, "mdtool: unknown flag: --x\n"},
		{usagef("unknown flag: --x"), ExitUsage, "mdtool: unknown flag: --x\n"},
		{exitStatus(ExitTestNoArray), ExitTestNoArray, ""},
		{exitf(ExitUsage, "bad %s", "thing"), ExitUsage, "mdtool: bad thing\n"},
	} {
		var b bytes.Buffer
		if got := reportError(&b, tt.err); got != tt.want || b.String() != tt.text {
			t.Errorf("reportError(%v) = %d, %q; want %d, %q", tt.err, got, b.String(), tt.want, tt.text)
		}
	}
}

// cobra's own commands (help, completion, __complete) are no unknown
// commands: they run and exit 0.
func TestCobraBuiltinCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "create"}, {"completion", "bash"}, {"__complete", "create", "--le"}} {
		var stdout, stderr bytes.Buffer
		env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
			Now: time.Now, Hostname: func() (string, error) { return "host", nil }}
		if code := Main(args, env); code != 0 || stdout.Len() == 0 || strings.Contains(stderr.String(), "unknown command") {
			t.Errorf("%q: exit %d, stdout %d bytes, stderr %q", args, code, stdout.Len(), stderr.String())
		}
	}
}
