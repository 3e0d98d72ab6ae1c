package cmd

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// combinedRunner returns a function that runs the mdtool binary bin with
// runDir as its run directory, no configuration file and no kernel block
// device, and none of the caller's MDTOOL_* settings (the cmd tests'
// MDTOOL_START=false among them, unlike binRunner's: create starts the
// array): its exit status and combined output.
func combinedRunner(t *testing.T, bin, runDir string) func(args ...string) (int, string) {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null", "MDTOOL_DEVICE=none")
	return func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
}
