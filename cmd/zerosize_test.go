package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// TestCreateRefusesZeroSize: members whose data space rounds to an array
// of 0 bytes (raid1 rounds the size down to 64K) are refused with one
// line naming the member, and nothing is written.
func TestCreateRefusesZeroSize(t *testing.T) {
	dir := t.TempDir()
	// 1 MiB data offset + 32 KiB of data space
	a := sparse(t, dir, "a", 1<<20+32<<10)
	b := sparse(t, dir, "b", 1<<20+32<<10)
	before := []([32]byte){fileHash(t, a), fileHash(t, b)}
	code, _, errs := mdtool(t, "create", "/dev/md/zero", "--run", "-l1", "-n2", a, b)
	if code != 1 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	want := "mdtool: " + a + " is too small for this array: 32K of data space gives an array of size 0\n"
	if errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	for i, p := range []string{a, b} {
		if fileHash(t, p) != before[i] {
			t.Errorf("%s was written", p)
		}
	}
}

// TestAssembleRefusesZeroSize: an array whose superblocks give it a size
// of 0 (component size 0) does not start: one line says why, and no
// daemon is left.
func TestAssembleRefusesZeroSize(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/zero", 2, 24<<20, "-l1", "-n2", "--assume-clean")
	for _, p := range devs {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4096)
		if _, err := f.ReadAt(b, 4096); err != nil {
			t.Fatal(err)
		}
		sb, err := superblock.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		sb.Size = 0
		if _, err := f.WriteAt(sb.MarshalWithChecksum(), 4096); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	before := hashAll(t, devs)
	code, _, errs := mdtool(t, append([]string{"assemble", "--foreground", "--run-dir", runDir, "/dev/md/zero"}, devs...)...)
	if code != 1 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	if !strings.Contains(errs, "mdtool: failed to RUN_ARRAY /dev/md/zero: array size is 0 (raid1, component size 0 sectors)\n") {
		t.Errorf("stderr:\n%s", errs)
	}
	if strings.Contains(errs, "has been started") {
		t.Errorf("started:\n%s", errs)
	}
	if names, _ := daemon.Names(runDir); len(names) != 0 {
		t.Errorf("daemons left running: %v", names)
	}
	after := hashAll(t, devs)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
}
