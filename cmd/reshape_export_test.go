package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
)

// TestReshapeExportSize: when a growing reshape ends, the exports show
// the new array size without a reassembly, as md's set_capacity does: a
// new NBD connection negotiates the new size (the connection made
// before the reshape keeps the size it negotiated: NBD cannot tell a
// client), the FUSE file's size follows (stat, reads and writes beyond
// the old end), and detail says so; the data before the old end is
// what was written, the added space reads as zeroes.
func TestReshapeExportSize(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	fuseDir := filepath.Join(dir, "fuse")
	os.MkdirAll(fuseDir, 0o755)
	md := "/dev/md/rx"
	devs := mkArray(t, dir, md, 4, 16<<20, "-l5", "-n4", "-c64", "--assume-clean")
	spare := sparse(t, dir, "rx-spare.img", 16<<20)
	s := serve(t, runDir, md, append([]string{"--fuse", fuseDir}, devs...)...)
	defer s.stopIfRunning()
	sock := daemon.PathsFor(runDir, s.name).NBD()
	file := filepath.Join(fuseDir, "rx")
	oldSize := arraySize(t, runDir, s.name)
	data := fillRandom(t, sock, 0, oldSize, 21)
	before, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "--grow", md, "--raid-devices=5", "--run-dir", runDir); code != 0 {
		t.Fatalf("grow: exit %d %s", code, errs)
	}
	reshapeFinished(t, runDir, md)
	newSize := arraySize(t, runDir, s.name)
	if newSize != oldSize/3*4 {
		t.Fatalf("array size after the reshape %d, want %d (old %d)", newSize, oldSize/3*4, oldSize)
	}
	if code, out, _ := mdtool(t, "detail", "--run-dir", runDir, md); code != 0 || !strings.Contains(out, "Raid Devices : 5\n") ||
		strings.Contains(out, "Delta Devices") {
		t.Errorf("detail after the reshape:\n%s", out)
	}
	c, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != newSize {
		t.Errorf("a new NBD connection negotiates %d bytes, want %d", c.Size(), newSize)
	}
	c.Close()
	if before.Size() != oldSize {
		t.Errorf("the connection made before the reshape has %d bytes, want the %d it negotiated", before.Size(), oldSize)
	}
	// The FUSE file follows (the daemon looks at the size every 200 ms).
	deadline := time.Now().Add(time.Minute)
	for {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() == newSize {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the FUSE file has %d bytes a minute after the reshape, want %d", fi.Size(), newSize)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, newSize)
	if n, err := f.ReadAt(got, 0); n != len(got) {
		t.Fatalf("reading the FUSE file: %d bytes, %v", n, err)
	}
	if !bytes.Equal(got[:oldSize], data) || !bytes.Equal(got[oldSize:], make([]byte, newSize-oldSize)) {
		t.Errorf("the FUSE file after the reshape: old data intact %v, added space zero %v",
			bytes.Equal(got[:oldSize], data), bytes.Equal(got[oldSize:], make([]byte, newSize-oldSize)))
	}
	tail := bytes.Repeat([]byte{0x5a}, 64<<10)
	if _, err := f.WriteAt(tail, newSize-int64(len(tail))); err != nil {
		t.Fatalf("writing the end of the grown FUSE file: %v", err)
	}
	if back := readArray(t, sock, newSize); !bytes.Equal(back[newSize-int64(len(tail)):], tail) {
		t.Error("a write at the end of the grown FUSE file does not read back through NBD")
	}
}
