package daemon

import (
	"errors"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"os"
	"path/filepath"
	"reflect"
	"testing"

	"mdtool/internal/serve/ublkexport"
)

// TestMdLinks: the md names that become links to the block device.
func TestMdLinks(t *testing.T) {
	for dev, want := range map[string][]string{
		"/dev/md/data": {"/dev/md/data"},
		"/dev/md0":     {"/dev/md0"},
		"/dev/md/0":    {"/dev/md/0"},
		"md3":          {"/dev/md3"},
		"7":            {"/dev/md7"},
		"data":         {"/dev/md/data"},
		"/tmp/x":       nil,
		"/dev/../etc":  nil,
		"a/b":          nil,
	} {
		if got := mdLinks(dev); !reflect.DeepEqual(got, want) {
			t.Errorf("mdLinks(%q) = %q, want %q", dev, got, want)
		}
	}
}

// TestMakeLinks: links are relative as udev's, replace a stale link, leave
// anything that is not a link alone, and removeLinks removes only links.
func TestMakeLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "nbd0")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "md", "data")
	os.MkdirAll(filepath.Dir(stale), 0o755)
	os.Symlink("../nbd9", stale)
	node := filepath.Join(dir, "md0")
	os.WriteFile(node, []byte("real"), 0o600)
	fresh := filepath.Join(dir, "md", "new")
	var logged []string
	made := makeLinks([]string{stale, node, fresh}, target, func(f string, a ...any) { logged = append(logged, f) })
	if !reflect.DeepEqual(made, []string{stale, fresh}) || len(logged) != 1 {
		t.Fatalf("made %q, logged %q", made, logged)
	}
	for _, l := range made {
		if got, _ := os.Readlink(l); got != "../nbd0" {
			t.Errorf("%s -> %q, want ../nbd0", l, got)
		}
	}
	removeLinks(append(made, node))
	for _, l := range made {
		if _, err := os.Lstat(l); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", l, err)
		}
	}
	if b, _ := os.ReadFile(node); string(b) != "real" {
		t.Error("removeLinks removed a file that is not a link")
	}
}

// TestDoorRecord: the run-directory record round-trips; none is nil.
func TestDoorRecord(t *testing.T) {
	p := PathsFor(t.TempDir(), "data")
	if r, err := ReadDoorRecord(p); r != nil || err != nil {
		t.Fatalf("no record: %v, %v", r, err)
	}
	want := &DoorRecord{Kind: DoorNBD, Index: 3, Path: "/dev/nbd3", Backend: "mdtool:00", Links: []string{"/dev/md/data"}}
	if err := writeDoorRecord(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDoorRecord(p)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("record %+v, %v", got, err)
	}
	if err := DeviceBusy(p.DoorPath()); err != nil {
		t.Errorf("a regular file is busy: %v", err)
	}
}

// TestDeviceBusyLoop: a block device held open with O_EXCL (as a mount
// holds it) is busy; once released it is not.
func TestDeviceBusyLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	defer exec.Command("losetup", "-d", loop).Run()
	if err := DeviceBusy(loop); err != nil {
		t.Fatalf("unused %s: %v", loop, err)
	}
	fd, err := unix.Open(loop, unix.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = DeviceBusy(loop)
	unix.Close(fd)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Code != CodeBusy {
		t.Fatalf("%s held with O_EXCL: %v, want a CodeBusy error", loop, err)
	}
	if err := DeviceBusy(loop); err != nil {
		t.Fatalf("released %s: %v", loop, err)
	}
}

// TestAttachDoorStaleRecord: a daemon that attaches no block device
// removes what a killed one recorded (its links, NAME.dev); ublk is not
// built in yet and an unknown kind is refused.
func TestAttachDoorStaleRecord(t *testing.T) {
	dir := t.TempDir()
	p := PathsFor(dir, "x")
	link := filepath.Join(dir, "md-x")
	os.Symlink("nbd0", link)
	if err := writeDoorRecord(p, &DoorRecord{Kind: DoorNBD, Index: 1 << 20, Path: "/dev/nbd1048576", Links: []string{link}}); err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{RunDir: dir, Name: "x", BlockDevice: DoorNone, Logf: t.Logf}}
	if err := s.attachDoor(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("stale link kept: %v", err)
	}
	if r, _ := ReadDoorRecord(p); r != nil {
		t.Errorf("stale record kept: %+v", r)
	}
	if d, _ := s.Door(); d != nil {
		t.Errorf("door %v with --device=none", d)
	}
	if ublkexport.Available(false) != nil { // a host without ublk_drv (CI's)
		s.cfg.BlockDevice = DoorUblk
		if err := s.attachDoor(); !errors.Is(err, ublkexport.ErrNoUblk) {
			t.Errorf("ublk on a host without ublk: %v", err)
		}
	}
	s.cfg.BlockDevice = "bogus"
	if err := s.attachDoor(); err == nil {
		t.Error("an unknown door kind was accepted")
	}
}
