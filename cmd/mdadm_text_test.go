package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateVerboseNotes: create --verbose prints mdadm 4.2's notes about
// the defaults it chose, in mdadm's order, and --quiet silences what
// mdadm's -q silences. The expected texts are mdadm 4.2's in the oracle VM
// (Linux 6.1) on four 20000 KiB loop devices (--start=false here prints
// "created." where mdadm prints "array /dev/md0 started.").
func TestCreateVerboseNotes(t *testing.T) {
	note := "mdtool: Note: this array has metadata at the start and\n" +
		"    may not be suitable as a boot device.  If you plan to\n" +
		"    store '/boot' on this device please ensure that\n" +
		"    your boot-loader understands md/v1.x metadata, or use\n" +
		"    --metadata=0.90\n"
	for _, tc := range []struct {
		args []string
		n    int
		want string
	}{
		{[]string{"-v", "-l10", "-n4"}, 4, "mdtool: layout defaults to n2\nmdtool: layout defaults to n2\nmdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-e1.2", "-l10", "-n4"}, 4, "mdtool: layout defaults to n2\nmdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\n"},
		{[]string{"-v", "-l6", "-n4"}, 4, "mdtool: layout defaults to left-symmetric\nmdtool: layout defaults to left-symmetric\nmdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-vv", "-l5", "-n3"}, 3, "mdtool: layout defaults to left-symmetric\nmdtool: layout defaults to left-symmetric\nmdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-l10", "-n4", "-p", "f2"}, 4, "mdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-l10", "-n4", "-c", "64"}, 4, "mdtool: layout defaults to n2\nmdtool: layout defaults to n2\nmdtool: size set to 18944K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-l1", "-n2"}, 2, note + "mdtool: size set to 18944K\nmdtool: creation continuing despite oddities due to --run\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-e1.0", "-l1", "-n2"}, 2, "mdtool: size set to 19968K\n"},
		{[]string{"-v", "-e1.0", "-l5", "-n3", "-c", "64"}, 3, "mdtool: layout defaults to left-symmetric\nmdtool: size set to 19968K\n"},
		{[]string{"-v", "-l0", "-n2"}, 2, "mdtool: chunk size defaults to 512K\nmdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-l", "linear", "-n2"}, 2, "mdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-v", "-l4", "-n3"}, 3, "mdtool: chunk size defaults to 512K\nmdtool: size set to 17920K\nmdtool: Defaulting to version 1.2 metadata\n"},
		// without --verbose: no notes; --quiet: nothing at all (mdadm
		// skips its member checks, the boot-device note among them, under
		// --run --quiet).
		{[]string{"-l10", "-n4"}, 4, "mdtool: Defaulting to version 1.2 metadata\n"},
		{[]string{"-q", "-l5", "-n3"}, 3, ""},
		{[]string{"-q", "-l1", "-n2"}, 2, ""},
		{[]string{"-l1", "-n2"}, 2, note + "mdtool: Defaulting to version 1.2 metadata\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--create", "/dev/md0", "--run", "--start=false"}, tc.args...)
			for i := 0; i < tc.n; i++ {
				args = append(args, sparse(t, dir, fmt.Sprintf("d%d.img", i), 20000<<10))
			}
			env, _, errb := testEnv("")
			if rc := Main(args, env); rc != 0 {
				t.Fatalf("exit %d: %s", rc, errb)
			}
			want := tc.want
			if want != "" || !strings.Contains(strings.Join(tc.args, " "), "-q") {
				want += "mdtool: array /dev/md0 created.\n"
			}
			if errb.String() != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", errb, want)
			}
		})
	}
}

// TestExamineForcedMetadataNoSuperblock: examine -e 1.x of a device without
// a superblock at that version's place says what mdadm 4.2's load_super1
// says, and exits 0 as mdadm's Examine does then.
func TestExamineForcedMetadataNoSuperblock(t *testing.T) {
	dir := t.TempDir()
	p := sparse(t, dir, "empty.img", 20000<<10)
	for _, e := range [][]string{{"-e1.2"}, {"--metadata=1.0"}, {"-e", "1"}, {"-e1.1"}} {
		args := append(append([]string{"--examine"}, e...), p)
		env, out, errb := testEnv("")
		rc := Main(args, env)
		want := "mdtool: No super block found on " + p + " (Expected magic a92b4efc, got 00000000)\n"
		if rc != 0 || errb.String() != want || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 0, %q", args, rc, errb, out, want)
		}
	}
	// Without -e it is guess_super's "No md superblock detected", exit 1.
	env, _, errb := testEnv("")
	if rc := Main([]string{"--examine", p}, env); rc != 1 || errb.String() != "mdtool: No md superblock detected on "+p+".\n" {
		t.Errorf("examine without -e: exit %d, %q", rc, errb)
	}
}

// TestCreateShortName runs the real binary: an array created by a short
// name is /dev/md/NAME ("array /dev/md/name started.") and --detail
// --export names it (MD_DEVNAME=name), as in mdadm's tests/00createnames;
// -q silences "started." and "stopped".
func TestCreateShortName(t *testing.T) {
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_START=") {
			env = append(env, e)
		}
	}
	env = append(env, "MDTOOL_RUN_DIR="+filepath.Join(dir, "run"), "MDTOOL_CONFIG=/dev/null")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return code, o.String(), e.String()
	}
	d0, d1 := sparse(t, dir, "d0.img", 20000<<10), sparse(t, dir, "d1.img", 20000<<10)
	code, _, errs := run("-CR", "name", "-l1", "-n2", "--homehost=mdvm", d0, d1)
	if code != 0 || !strings.HasSuffix(errs, "mdtool: Defaulting to version 1.2 metadata\nmdtool: array /dev/md/name started.\n") {
		t.Fatalf("create by short name: exit %d\n%s", code, errs)
	}
	t.Cleanup(func() { run("-S", "/dev/md/name") })
	code, out, errs := run("-D", "--export", "/dev/md/name")
	if code != 0 || !strings.Contains(out, "MD_DEVNAME=name\n") || !strings.Contains(out, "MD_NAME=mdvm:name\n") {
		t.Errorf("detail --export: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run("-q", "-S", "/dev/md/name"); code != 0 || out != "" || errs != "" {
		t.Errorf("-q -S: exit %d, %q %q", code, out, errs)
	}
	// Created quietly: nothing at all.
	d2, d3 := sparse(t, dir, "d2.img", 20000<<10), sparse(t, dir, "d3.img", 20000<<10)
	if code, out, errs := run("-CR", "-q", "/dev/md/quiet", "-l1", "-n2", d2, d3); code != 0 || out != "" || errs != "" {
		t.Errorf("-CR -q: exit %d, %q %q", code, out, errs)
	}
	t.Cleanup(func() { run("-S", "/dev/md/quiet") })
	// -q before the md device of a manage command: --fail and --add say
	// nothing, "hot removed" stays (mdadm 4.2 hands Manage_remove its
	// verbose and force arguments swapped).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-q", "/dev/md/quiet", "--fail", d2}, ""},
		{[]string{"-q", "/dev/md/quiet", "--remove", d2}, "mdtool: hot removed " + d2 + " from /dev/md/quiet\n"},
		{[]string{"-q", "/dev/md/quiet", "--add", d2}, ""},
	} {
		if code, out, errs := run(tc.args...); code != 0 || out != "" || errs != tc.want {
			t.Errorf("%v: exit %d, %q %q, want 0 %q", tc.args, code, out, errs, tc.want)
		}
	}
	// An array that is not running: mdadm's words per mode.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-D", "/dev/md5"}, 1, "mdtool: cannot open /dev/md5: No such file or directory\n"},
		{[]string{"-S", "/dev/md5"}, 1, "mdtool: error opening /dev/md5: No such file or directory\n"},
		{[]string{"/dev/md5", "--fail", d0}, 1, "mdtool: error opening /dev/md5: No such file or directory\n"},
		{[]string{"-W", "/dev/md5"}, 2, "mdtool: stat failed for /dev/md5: No such file or directory\n"},
		{[]string{"--action=check", "/dev/md5"}, 1, "mdtool: Couldn't open /dev/md5: No such file or directory\n"},
	} {
		if code, _, errs := run(tc.args...); code != tc.code || errs != tc.want {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// TestZeroSuperblockForcedMetadata: zero-superblock -e 1.x of a device
// without that superblock says load_super1's words and exits 2; -q
// silences Kill's messages (mdadm 4.2 in the oracle VM).
func TestZeroSuperblockForcedMetadata(t *testing.T) {
	dir := t.TempDir()
	p := sparse(t, dir, "empty.img", 20000<<10)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--zero-superblock", "-e1.2", p}, 2, "mdtool: No super block found on " + p + " (Expected magic a92b4efc, got 00000000)\n"},
		{[]string{"--zero-superblock", p}, 0, "mdtool: Unrecognised md component device - " + p + "\n"},
		{[]string{"--zero-superblock", "-q", p}, 0, ""},
	} {
		env, _, errb := testEnv("")
		if rc := Main(tc.args, env); rc != int(tc.code) || errb.String() != tc.want {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, rc, errb, tc.code, tc.want)
		}
	}
}

// TestScanFindsLoopDevices: without DEVICE lines, examine --scan and
// assemble --scan read every block device of /proc/partitions as mdadm
// does, loop devices among them: the ARRAY line of an array on two loop
// devices is generated, and -As with an mdadm.conf holding only that line
// finds and starts the members.
func TestScanFindsLoopDevices(t *testing.T) {
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Fatalf("losetup: %v", err)
	}
	bin := mdtoolBinary(t)
	dir := t.TempDir()
	imgs := []string{sparse(t, dir, "d0.img", 20000<<10), sparse(t, dir, "d1.img", 20000<<10)}
	{
		env, _, errb := testEnv("")
		if rc := Main([]string{"--create", "/dev/md/scanloop", "--run", "--start=false", "--homehost=testhost", "-l1", "-n2", imgs[0], imgs[1]}, env); rc != 0 {
			t.Fatalf("create: exit %d: %s", rc, errb)
		}
	}
	var loops []string
	for _, img := range imgs {
		out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
		if err != nil {
			t.Fatalf("losetup: %v: %s", err, out)
		}
		l := strings.TrimSpace(string(out))
		loops = append(loops, l)
		t.Cleanup(func() { exec.Command("losetup", "-d", l).Run() })
	}
	empty := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(empty, []byte("# no DEVICE line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, out, errb := testEnv("")
	Main([]string{"--examine", "--scan", "--config=" + empty}, env) // other arrays on this machine's devices may complain
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "ARRAY /dev/md/scanloop ") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, " name=testhost:scanloop") {
		t.Fatalf("examine --scan without DEVICE lines has no ARRAY line for the array on %v:\n%s%s", loops, out, errb)
	}
	conf := filepath.Join(dir, "mdadm.conf")
	if err := os.WriteFile(conf, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var envv []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MDTOOL_") {
			envv = append(envv, e)
		}
	}
	envv = append(envv, "MDTOOL_RUN_DIR="+filepath.Join(dir, "run"), "MDTOOL_CONFIG=/dev/null")
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = envv
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return code, string(b)
	}
	code, o := run("-As", "-c", conf, "--homehost=testhost")
	if code != 0 || !strings.Contains(o, "mdtool: /dev/md/scanloop has been started with 2 drives.\n") {
		t.Fatalf("-As with an ARRAY-only mdadm.conf: exit %d\n%s", code, o)
	}
	t.Cleanup(func() { run("-S", "/dev/md/scanloop") })
	code, o = run("-D", "/dev/md/scanloop")
	for _, l := range loops {
		if !strings.Contains(o, "active sync   "+l+"\n") {
			t.Errorf("detail: %s is not a member:\n%s", l, o)
		}
	}
	if code, o := run("-S", "/dev/md/scanloop"); code != 0 {
		t.Errorf("stop: exit %d: %s", code, o)
	}
}
