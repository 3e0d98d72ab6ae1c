package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/internal/daemon"
)

// TestCreateStartsArray runs the real binary: like mdadm --create, create
// starts serving the new array (its initial recovery runs in the daemon),
// unless --start=false.
func TestCreateStartsArray(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_START=") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+runDir, "MDTOOL_CONFIG=/dev/null")
	runBin := func(args ...string) (int, string) { return runBinEnv(t, bin, env, args...) }
	var devs []string
	for i := 0; i < 3; i++ {
		devs = append(devs, sparse(t, dir, "cs"+string(rune('0'+i))+".img", 32<<20))
	}
	code, out := runBin(append([]string{"--create", "/dev/md/cs", "--run", "--homehost=testhost", "-l5", "-n3"}, devs...)...)
	if code != 0 || out != "mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md/cs started.\n" {
		t.Fatalf("create: exit %d, output %q", code, out)
	}
	t.Cleanup(func() { runBin("stop", "/dev/md/cs") })
	if _, err := os.Stat(daemon.PathsFor(runDir, "cs").NBD()); err != nil {
		t.Errorf("no NBD socket after create: %v", err)
	}
	// The initial recovery onto the last member runs in the daemon.
	if code, out := runBin("wait", "/dev/md/cs"); code != 0 && code != 1 {
		t.Errorf("wait: exit %d: %s", code, out)
	}
	code, out = runBin("detail", "/dev/md/cs")
	if code != 0 || !strings.Contains(out, "             State : clean \n") || !strings.Contains(out, "active sync   "+devs[2]) {
		t.Errorf("detail after the initial recovery: exit %d\n%s", code, out)
	}
	if code, out := runBin("stop", "/dev/md/cs"); code != 0 || out != "mdtool: stopped /dev/md/cs\n" {
		t.Fatalf("stop: exit %d: %q", code, out)
	}

	// --start=false only writes the metadata.
	var devs2 []string
	for i := 0; i < 2; i++ {
		devs2 = append(devs2, sparse(t, dir, "ns"+string(rune('0'+i))+".img", 32<<20))
	}
	code, out = runBin(append([]string{"create", "/dev/md/ns", "--run", "--start=false", "--homehost=testhost", "-l1", "-n2", "--bitmap=none"}, devs2...)...)
	if code != 0 || !strings.HasSuffix(out, "mdtool: array /dev/md/ns created.\n") {
		t.Fatalf("create --start=false: exit %d: %q", code, out)
	}
	if code, out := runBin("detail", "/dev/md/ns"); code == 0 {
		t.Errorf("an array created with --start=false is running:\n%s", out)
	}
}
