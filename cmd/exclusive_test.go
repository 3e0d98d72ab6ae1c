package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/member"
)

// binRunner runs the real binary with its own run directory, no config
// files, and create not starting arrays (MDTOOL_START=false, set by
// TestMain). Every run is bounded by a generous timeout that only fails the
// test: a command blocked in open() on a FIFO shows up as a failure, not as
// a hung test binary.
type binRunner struct {
	t      *testing.T
	bin    string
	runDir string
	env    []string
}

func newBinRunner(t *testing.T, dir string) *binRunner {
	r := &binRunner{t: t, bin: mdtoolBinary(t), runDir: filepath.Join(dir, "run")}
	r.env = append(os.Environ(), "MDTOOL_RUN_DIR="+r.runDir, "MDTOOL_CONFIG=/dev/null")
	return r
}

func (r *binRunner) command(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = r.env
	var errb bytes.Buffer
	cmd.Stdout = &bytes.Buffer{}
	cmd.Stderr = &errb
	// A daemon the command started keeps the pipes until it is ready.
	cmd.WaitDelay = 30 * time.Second
	return cmd, &errb
}

// run returns the exit status, stdout and stderr.
func (r *binRunner) run(args ...string) (int, string, string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, errb := r.command(ctx, args...)
	err := cmd.Run()
	if ctx.Err() != nil {
		r.t.Fatalf("mdtool %v did not finish within 3 minutes (blocked?); stderr: %s", args, errb)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("mdtool %v: %v", args, err)
	}
	return code, cmd.Stdout.(*bytes.Buffer).String(), errb.String()
}

// serveBin assembles md from devs with the real binary (a background
// daemon) and stops it when the test ends.
func (r *binRunner) serveBin(md string, args ...string) int {
	r.t.Helper()
	code, _, errs := r.run(append([]string{"-A", md}, args...)...)
	if code != 0 {
		r.t.Fatalf("assemble %s: exit %d: %s", md, code, errs)
	}
	name := filepath.Base(md)
	st, err := queryStatus(r.runDir, name)
	if err != nil {
		r.t.Fatalf("no daemon for %s: %v", md, err)
	}
	r.t.Cleanup(func() {
		r.run("stop", md)
		waitGone(r.t, st.PID)
	})
	return st.PID
}

func checkUnchanged(t *testing.T, what string, before map[string][32]byte) {
	t.Helper()
	for p, h := range before {
		if sparseHash(t, p) != h {
			t.Errorf("%s: %s changed", what, p)
		}
	}
}

// TestServedMembersRefused: the members of a served array are held
// exclusively by its daemon. create --force, zero-superblock (with and
// without --force) and --add to another array are refused with mdadm's
// texts and statuses, and not one byte of a member changes. examine still
// reads them, as with mdadm.
func TestServedMembersRefused(t *testing.T) {
	dir := t.TempDir()
	r := newBinRunner(t, dir)
	devs := mkArray(t, dir, "/dev/md/sv", 3, 32<<20, "-l5", "-n3", "--assume-clean", "--bitmap=none")
	other := mkArray(t, dir, "/dev/md/ot", 2, 32<<20, "-l1", "-n2", "--assume-clean", "--bitmap=none")
	r.serveBin("/dev/md/sv", devs...)
	r.serveBin("/dev/md/ot", other...)
	before := hashAll(t, append(append([]string{}, devs...), other...))

	code, _, errs := r.run(append([]string{"create", "/dev/md/new", "--run", "--force", "-l5", "-n3", "--assume-clean", "--homehost=testhost"}, devs...)...)
	if code != 2 || !strings.HasPrefix(errs, "mdtool: cannot open ") || !strings.HasSuffix(errs, ": Device or resource busy\n") || strings.Count(errs, "\n") != 1 {
		t.Errorf("create --force over served members: exit %d: %q", code, errs)
	}
	// One served member among fresh files: refused too, the fresh ones
	// are not written either.
	fresh := []string{sparse(t, dir, "fresh0.img", 32<<20), sparse(t, dir, "fresh1.img", 32<<20)}
	freshHash := hashAll(t, fresh)
	code, _, errs = r.run("create", "/dev/md/new", "--run", "--force", "-l5", "-n3", "--homehost=testhost", fresh[0], devs[1], fresh[1])
	if code != 2 || errs != "mdtool: cannot open "+devs[1]+": Device or resource busy\n" {
		t.Errorf("create with one served member: exit %d: %q", code, errs)
	}
	checkUnchanged(t, "create refused", freshHash)
	for _, args := range [][]string{{"zero-superblock", devs[1]}, {"zero-superblock", "--force", devs[1]}, {"--zero-superblock", "-f", devs[2]}} {
		code, _, errs := r.run(args...)
		dev := args[len(args)-1]
		if code != 2 || errs != "mdtool: Couldn't open "+dev+" for write - not zeroing\n" {
			t.Errorf("%v: exit %d: %q", args, code, errs)
		}
	}
	for _, args := range [][]string{{"/dev/md/ot", "--add", devs[0]}, {"manage", "/dev/md/ot", "--add", "--force", devs[2]}, {"/dev/md/ot", "--add-spare", devs[1]}} {
		code, _, errs := r.run(args...)
		dev := args[len(args)-1]
		if code == 0 || !strings.Contains(errs, dev) || !strings.Contains(errs, "Device or resource busy") {
			t.Errorf("%v: exit %d: %q", args, code, errs)
		}
	}
	// A FIFO given to --add: refused by the daemon, which does not block.
	fifo := filepath.Join(dir, "sv-fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := r.run("/dev/md/ot", "--add", fifo); code == 0 || errs != "mdtool: Cannot open "+fifo+": Not a block device or regular file\n" {
		t.Errorf("--add of a FIFO: exit %d: %q", code, errs)
	}
	// Readers take no lock.
	if code, out, errs := r.run("examine", devs[0]); code != 0 || !strings.Contains(out, "Raid Level : raid5") {
		t.Errorf("examine of a served member: exit %d: %s%s", code, out, errs)
	}
	if code, _, errs := r.run("-E", "--scan", devs[0], devs[1], devs[2]); code != 0 {
		t.Errorf("examine --scan of served members: exit %d: %s", code, errs)
	}
	checkUnchanged(t, "while served", before)
	if code, out, _ := r.run("detail", "/dev/md/ot"); code != 0 || !strings.Contains(out, "Raid Devices : 2") || strings.Contains(out, devs[0]) {
		t.Errorf("detail of the other array after the refused adds: exit %d\n%s", code, out)
	}
}

// TestConcurrentCreate: two creates started together over the same fresh
// files. The members are locked in one order, so exactly one succeeds
// every time, and every member carries its superblock.
func TestConcurrentCreate(t *testing.T) {
	dir := t.TempDir()
	r := newBinRunner(t, dir)
	for round := 0; round < 20; round++ {
		var devs []string
		for i := 0; i < 3; i++ {
			devs = append(devs, sparse(t, dir, fmt.Sprintf("r%d-%d.img", round, i), 16<<20))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var cmds []*exec.Cmd
		var errbs []*bytes.Buffer
		for _, name := range []string{"ca", "cb"} {
			// Different argument orders: the lock order must not depend on it.
			ds := devs
			if name == "cb" {
				ds = []string{devs[2], devs[0], devs[1]}
			}
			cmd, errb := r.command(ctx, append([]string{"create", "/dev/md/" + name, "--run", "--refuse-data", "-l5", "-n3", "--bitmap=none", "--homehost=testhost"}, ds...)...)
			cmds = append(cmds, cmd)
			errbs = append(errbs, errb)
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		var ok []string
		for i, c := range cmds {
			err := c.Wait()
			if ctx.Err() != nil {
				t.Fatalf("round %d: create did not finish", round)
			}
			if err == nil {
				ok = append(ok, []string{"ca", "cb"}[i])
			} else if s := errbs[i].String(); !strings.Contains(s, "Device or resource busy") && !strings.Contains(s, "appears to contain") {
				t.Errorf("round %d: the losing create said %q", round, s)
			}
		}
		cancel()
		if len(ok) != 1 {
			t.Fatalf("round %d: %d creates succeeded (%v), want exactly 1\n%s\n%s", round, len(ok), ok, errbs[0], errbs[1])
		}
		for _, d := range devs {
			m, err := member.Open(d, member.ReadOnly)
			if err != nil {
				t.Fatal(err)
			}
			v, err := m.LoadV1(-1)
			m.Close()
			if err != nil || !strings.HasSuffix(v.SB.Name(), ":"+ok[0]) {
				name := ""
				if v != nil {
					name = v.SB.Name()
				}
				t.Errorf("round %d: %s: superblock %q, %v; want the winner's (%s)", round, d, name, err, ok[0])
			}
		}
	}
}

// TestNonMemberPaths: FIFOs, directories, character devices and the same
// file given twice never make a command block or write: each is refused
// with one line or left out with a message.
func TestNonMemberPaths(t *testing.T) {
	dir := t.TempDir()
	r := newBinRunner(t, dir)
	devs := mkArray(t, dir, "/dev/md/np", 2, 16<<20, "-l1", "-n2", "--assume-clean", "--bitmap=internal")
	fifo := filepath.Join(dir, "np-fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "np-dir")
	os.Mkdir(sub, 0o755)
	null := filepath.Join(dir, "np-null")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	fresh := []string{sparse(t, dir, "f0.img", 16<<20), sparse(t, dir, "f1.img", 16<<20)}
	all := append(append([]string{}, devs...), fresh...)
	before := hashAll(t, all)
	bad := []string{fifo, sub, "/dev/null", null}
	for _, p := range bad {
		line := "mdtool: " + p + " is not a block device or regular file.\n"
		for _, args := range [][]string{{"examine", p}, {"-E", "--json", p}, {"-X", p}, {"zero-superblock", p}, {"zero-superblock", "--force", p},
			{"create", "/dev/md/x", "--run", "-l1", "-n3", "--force", "--homehost=testhost", fresh[0], p, fresh[1]}} {
			code, _, errs := r.run(args...)
			if code == 0 || !strings.HasPrefix(errs, line) {
				t.Errorf("%v: exit %d: %q, want it to start with %q", args, code, errs, line)
			}
		}
		code, _, errs := r.run("examine", p, devs[0])
		if code != 1 || !strings.Contains(errs, line) {
			t.Errorf("examine %s %s: exit %d: %q", p, devs[0], code, errs)
		}
	}
	checkUnchanged(t, "refused paths", before)

	// The same file twice: by path, symlink and hard link.
	link := filepath.Join(dir, "f0-link")
	os.Symlink(fresh[0], link)
	hard := filepath.Join(dir, "f0-hard")
	if err := os.Link(fresh[0], hard); err != nil {
		t.Fatal(err)
	}
	for _, twice := range []string{fresh[0], link, hard} {
		code, _, errs := r.run("create", "/dev/md/x", "--run", "-l1", "-n3", "--force", "--homehost=testhost", fresh[0], fresh[1], twice)
		if code != 2 || errs != "mdtool: "+twice+" is listed more than once\n" {
			t.Errorf("create with %s twice: exit %d: %q", twice, code, errs)
		}
	}
	checkUnchanged(t, "same file twice", before)

	// assemble: a bad path on the command line aborts the assembly, as a
	// device without a superblock does with mdadm; nothing is started.
	for _, p := range bad {
		code, _, errs := r.run("-A", "/dev/md/np", devs[0], p, devs[1])
		if code != 1 || errs != "mdtool: "+p+" is not a block device or regular file.\nmdtool: "+p+" has no superblock - assembly aborted\n" {
			t.Errorf("assemble with %s: exit %d: %q", p, code, errs)
		}
		if _, err := queryStatus(r.runDir, "np"); err == nil {
			t.Fatalf("assemble with %s started the array", p)
		}
	}
	checkUnchanged(t, "assemble refused", before)
	// The same member twice (symlink) and a byte copy of a member: the
	// array starts from two distinct members.
	copyPath := filepath.Join(dir, "np-copy.img")
	run(t, "cp", "--sparse=always", devs[1], copyPath)
	devLink := filepath.Join(dir, "np-d0-link")
	os.Symlink(devs[0], devLink)
	code, _, errs := r.run("-A", "/dev/md/np", devs[0], devLink, devs[1], copyPath)
	if code != 0 || !strings.Contains(errs, "has been started with 2 drives") {
		t.Errorf("assemble with duplicates: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "mdtool: "+devLink+" is the same device as "+devs[0]+" - skipping\n") ||
		!strings.Contains(errs, "mdtool: "+copyPath+" has the same superblock as "+devs[1]+" (slot 1, same events) - skipping") {
		t.Errorf("assemble did not say why the duplicates were left out:\n%s", errs)
	}
	if code, out, _ := r.run("detail", "/dev/md/np"); code != 0 || strings.Count(out, "active sync") != 2 {
		t.Errorf("detail:\n%s", out)
	}
	if code, _, errs := r.run("stop", "/dev/md/np"); code != 0 {
		t.Fatalf("stop: %d %s", code, errs)
	}

	// -As over a DEVICE glob that matches the FIFO, the directory and the
	// /dev/null link: they are skipped.
	conf := filepath.Join(dir, "mdadm.conf")
	os.WriteFile(conf, []byte("DEVICE "+filepath.Join(dir, "np-*")+"\nARRAY /dev/md/np name=testhost:np\n"), 0o644)
	os.Remove(copyPath)
	os.Remove(devLink)
	os.Rename(devs[0], filepath.Join(dir, "np-m0.img"))
	os.Rename(devs[1], filepath.Join(dir, "np-m1.img"))
	code, _, errs = r.run("-As", "--config="+conf)
	if code != 0 || !strings.Contains(errs, "has been started with 2 drives") {
		t.Errorf("-As with a DEVICE glob over a FIFO: exit %d: %s", code, errs)
	}
	r.run("stop", "/dev/md/np")
	code, out, errs := r.run("-Es", "--config="+conf)
	if code != 0 || !strings.Contains(out, "ARRAY /dev/md/np ") {
		t.Errorf("-Es with a DEVICE glob over a FIFO: exit %d: %s%s", code, out, errs)
	}
}

// TestSymlinkedRunFiles: NAME.lock and NAME.log in the run directory are
// not followed when they are symbolic links; assemble refuses, the file
// they point at stays as it was.
func TestSymlinkedRunFiles(t *testing.T) {
	dir := t.TempDir()
	r := newBinRunner(t, dir)
	devs := mkArray(t, dir, "/dev/md/sl", 2, 16<<20, "-l1", "-n2", "--assume-clean", "--bitmap=none")
	os.MkdirAll(r.runDir, 0o755)
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep me\n"), 0o644)
	p := daemon.PathsFor(r.runDir, "sl")
	for _, f := range []string{p.Lock(), p.Log()} {
		if err := os.Symlink(victim, f); err != nil {
			t.Fatal(err)
		}
		code, _, errs := r.run(append([]string{"-A", "/dev/md/sl"}, devs...)...)
		if code == 0 || !strings.Contains(errs, f+" is a symbolic link") {
			t.Errorf("assemble with %s a symlink: exit %d: %q", filepath.Base(f), code, errs)
			r.run("stop", "/dev/md/sl")
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
			t.Errorf("symlinked %s: target now %q", filepath.Base(f), b)
		}
		os.Remove(f)
	}
	r.serveBin("/dev/md/sl", devs...)
}

// TestStaleFUSEMount: a daemon serving --fuse killed with SIGKILL leaves a
// dead FUSE mount (stat: ENOTCONN); the next assemble --fuse detaches it
// and serves again.
func TestStaleFUSEMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil && os.Getenv("CI") == "" {
		t.Skip("no /dev/fuse")
	}
	dir := t.TempDir()
	r := newBinRunner(t, dir)
	fuseDir := filepath.Join(dir, "fuse")
	os.MkdirAll(fuseDir, 0o755)
	t.Cleanup(func() { unix.Unmount(fuseDir, unix.MNT_DETACH) })
	devs := mkArray(t, dir, "/dev/md/fz", 2, 16<<20, "-l1", "-n2", "--assume-clean", "--bitmap=none")
	args := append([]string{"-A", "/dev/md/fz", "--fuse", fuseDir}, devs...)
	code, _, errs := r.run(args...)
	if code != 0 {
		t.Fatalf("assemble --fuse: exit %d: %s", code, errs)
	}
	st, err := queryStatus(r.runDir, "fz")
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	waitGone(t, st.PID)
	// statfs always asks the FUSE server: the mount is dead at once.
	var sfs unix.Statfs_t
	if err := unix.Statfs(fuseDir, &sfs); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.EIO) {
		t.Fatalf("after SIGKILL: statfs %s: %v, want ENOTCONN, ECONNABORTED or EIO (a dead FUSE mount)", fuseDir, err)
	}
	pid := r.serveBin("/dev/md/fz", append([]string{"--fuse", fuseDir}, devs...)...)
	b := make([]byte, 4096)
	f, err := os.Open(filepath.Join(fuseDir, "fz"))
	if err != nil {
		t.Fatalf("FUSE file after re-assemble: %v", err)
	}
	if n, err := f.ReadAt(b, 0); n != len(b) || err != nil {
		t.Errorf("read the FUSE file: %d, %v", n, err)
	}
	f.Close()
	// The dead mount was detached, not buried under the new one: once the
	// array stops, nothing is mounted on the directory any more.
	if code, _, errs := r.run("stop", "/dev/md/fz"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, errs)
	}
	waitGone(t, pid)
	if err := unix.Statfs(fuseDir, &sfs); err != nil {
		t.Errorf("after stop: statfs %s: %v (a dead mount left under the new one?)", fuseDir, err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), " "+fuseDir+" ") {
		t.Errorf("%s still a mount point after stop:\n%s", fuseDir, mi)
	}
}
