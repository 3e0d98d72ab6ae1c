package cmd

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/serve/kernelnbd"
)

// TestDeviceFlag: --device takes auto, ublk, nbd and none; anything else
// (from the flag or from MDTOOL_DEVICE) is a usage error, before any
// member is touched.
func TestDeviceFlag(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	for _, cmd := range []string{"assemble", "create"} {
		code, _, errs := mdtool(t, cmd, "/dev/md/x", "--device=bogus", "-l1", "-n2", "a.img", "b.img")
		if cmd == "assemble" {
			code, _, errs = mdtool(t, cmd, "--run-dir", runDir, "/dev/md/x", "--device=bogus", "a.img", "b.img")
		}
		if code != 2 || !strings.Contains(errs, `bad --device "bogus": auto, ublk, nbd or none`) {
			t.Errorf("%s --device=bogus: exit %d: %s", cmd, code, errs)
		}
	}
	t.Setenv("MDTOOL_DEVICE", "nbdx")
	code, _, errs := mdtool(t, "assemble", "--run-dir", runDir, "/dev/md/x", "a.img", "b.img")
	if code != 2 || !strings.Contains(errs, `bad --device "nbdx"`) {
		t.Errorf("MDTOOL_DEVICE=nbdx: exit %d: %s", code, errs)
	}
}

// TestDeviceAutoWithoutDoor: where the kernel has neither ublk nor NBD
// (the CI host), the default --device=auto serves the array as before and
// says why there is no block device in one line; --device=nbd fails with
// exit 1 and leaves the array stopped; --device=none says nothing.
func TestDeviceAutoWithoutDoor(t *testing.T) {
	if kernelnbd.Available() == nil {
		t.Skip("this kernel has an NBD client (the VM tests cover it)")
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/door", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/door", devs...)
	st, err := queryStatus(runDir, "door")
	if err != nil {
		t.Fatal(err)
	}
	if st.KernelDevice != "" || !strings.Contains(st.KernelDeviceNote, "no kernel NBD client") {
		t.Errorf("status: kernel device %q, note %q", st.KernelDevice, st.KernelDeviceNote)
	}
	s.stop()
	got := s.stderr.String()
	const line = "mdtool: /dev/md/door: no kernel block device: no ublk door, and no kernel NBD client (module nbd not available)\n"
	if strings.Count(got, line) != 1 || strings.Contains(got, "attached as") {
		t.Errorf("stderr:\n%s\nwant the line once:\n%s", got, line)
	}

	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", runDir, "/dev/md/door", "--device=nbd", devs[0], devs[1])
	if code != 1 || !strings.Contains(errs, "mdtool: cannot serve /dev/md/door: block device: NBD connect: no kernel NBD client") {
		t.Errorf("--device=nbd: exit %d: %s", code, errs)
	}
	s = serve(t, runDir, "/dev/md/door", append([]string{"--device=none"}, devs...)...)
	s.stop()
	if got := s.stderr.String(); strings.Contains(got, "block device") {
		t.Errorf("--device=none:\n%s", got)
	}
}

// TestStopForce: stop --force is answered (the daemon sends the answer
// before it closes its control socket) and stops the array while an NBD
// client is connected, which plain stop refuses with mdadm's words.
func TestStopForce(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/sf", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, "/dev/md/sf", append([]string{"--device=none"}, devs...)...)
	c, err := net.Dial("unix", filepath.Join(runDir, "sf.nbd"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server's greeting: the connection is accepted (and counted).
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 18)); err != nil {
		t.Fatalf("NBD greeting: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, errs := mdtool(t, "stop", "--run-dir", runDir, "/dev/md/sf")
		if code == 1 && strings.Contains(errs, "mdtool: Cannot get exclusive access to /dev/md/sf:Perhaps a running process, mounted filesystem or active volume group?\n") {
			break
		}
		if code == 0 || time.Now().After(deadline) {
			t.Fatalf("stop with a client connected: exit %d: %s", code, errs)
		}
	}
	code, _, errs := mdtool(t, "stop", "--force", "--run-dir", runDir, "/dev/md/sf")
	if code != 0 || errs != "mdtool: stopped /dev/md/sf\n" {
		t.Fatalf("stop --force: exit %d: %q", code, errs)
	}
	s.wait()
}
