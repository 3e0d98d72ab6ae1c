package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateRecoversIntoMovedDevice: a raid5 created with spares (mdadm's
// tests/03r5assemV1: -l5 -n3 -x2) recovers into its last raid device,
// which mdadm adds as a spare after all the others, not into one of the
// real spares: md offers the empty slot to the device bound last first.
func TestCreateRecoversIntoMovedDevice(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+filepath.Join(dir, "run"), "MDTOOL_CONFIG=/dev/null", "MDTOOL_DEVICE=none")
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return 0, string(out)
	}
	var devs []string
	for i := 0; i < 5; i++ {
		devs = append(devs, sparse(t, dir, "r"+string(rune('0'+i))+".img", 20000<<10))
	}
	if code, out := run(append([]string{"--create", "/dev/md1", "--run", "-e1", "--name", "one", "-l5", "-n3", "-x2"}, devs...)...); code != 0 {
		t.Fatalf("create: exit %d: %s", code, out)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			run("--stop", "/dev/md1")
		}
	})
	if code, out := run("--wait", "/dev/md1"); code != 0 && code != 1 {
		t.Fatalf("wait: exit %d: %s", code, out)
	}
	if code, out := run("--detail", "--brief", "/dev/md1"); code != 0 || !strings.Contains(out, " spares=2 ") {
		t.Errorf("-Db after the initial recovery: exit %d: %s", code, out)
	}
	if code, out := run("--stop", "/dev/md1"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, out)
	}
	stopped = true
	want := []string{"Active device 0", "Active device 1", "Active device 2", "spare", "spare"}
	for i, d := range devs {
		code, out := run("--examine", d)
		if code != 0 || !strings.Contains(out, "   Device Role : "+want[i]+"\n") {
			t.Errorf("-E of member %d (want %q): exit %d\n%s", i, want[i], code, out)
		}
	}
}
