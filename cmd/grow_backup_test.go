package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGrowBackupFile: `--grow --raid-devices=4 --backup-file=F` of a
// raid5 of 3 (with a spare) reshapes in place as mdadm 4.2 does with a
// backup file: mdadm's "Need to backup" line, data_offset unchanged, the
// data intact, the backup file removed when the reshape ends. An existing
// file is refused with mdadm's words before anything changes.
func TestGrowBackupFile(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/bf"
	devs := mkArray(t, dir, md, 3, 16<<20, "-l5", "-n3", "-c64", "--assume-clean")
	_, before, _ := mdtool(t, "examine", devs[0])
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	data := nbdWrite(t, s.nbdURI(), 8<<20)
	spare := sparse(t, dir, "bf-spare.img", 16<<20)
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	exists := filepath.Join(dir, "exists")
	if err := os.WriteFile(exists, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := mdtool(t, "--grow", md, "-n4", "--backup-file", exists, "--run-dir", runDir); code != 1 ||
		errs != "mdtool: Need to backup 384K of critical section..\nmdtool: "+md+": cannot create backup file "+exists+": File exists\n" {
		t.Fatalf("grow with an existing backup file: exit %d %q", code, errs)
	}
	if d := detailJSONOf(t, runDir, md); d["raid_devices"] != float64(3) {
		t.Fatalf("the refused grow changed raid_devices: %v", d["raid_devices"])
	}
	bu := filepath.Join(dir, "md-test-backup")
	if code, _, errs := mdtool(t, "--grow", md, "-n4", "--backup-file", bu, "--run-dir", runDir); code != 0 ||
		errs != "mdtool: Need to backup 384K of critical section..\n" {
		t.Fatalf("grow: exit %d %q", code, errs)
	}
	syncDone(t, runDir, md, "reshape")
	if d := detailJSONOf(t, runDir, md); d["raid_devices"] != float64(4) {
		t.Errorf("detail after the reshape: raid_devices %v", d["raid_devices"])
	}
	if got := nbdRead(t, s.nbdURI(), len(data)); !bytes.Equal(got, data) {
		t.Error("data changed by the in-place reshape")
	}
	s.stop()
	if _, err := os.Stat(bu); !os.IsNotExist(err) {
		t.Errorf("the backup file is still there after the reshape: %v", err)
	}
	off := ""
	for _, l := range strings.Split(before, "\n") {
		if strings.Contains(l, "Data Offset :") {
			off = l
		}
	}
	for _, p := range append(devs, spare) {
		_, out, _ := mdtool(t, "examine", p)
		if !strings.Contains(out, "Raid Devices : 4") || strings.Contains(out, "Reshape") || off == "" || !strings.Contains(out, off) {
			t.Errorf("%s after the reshape (want %q):\n%s", p, off, out)
		}
	}
}

// TestGrowBackupRestart: a daemon killed (kill -9) inside an in-place
// growth's critical section -- the section moved, the superblocks still
// at 0 -- leaves an array that assemble refuses without the backup file,
// with mdadm's words, and restores from it with --backup-file
// (Grow_restart): the reshape finishes, the data is intact and the
// backup file is removed.
func TestGrowBackupRestart(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/br"
	devs := mkArray(t, dir, md, 3, 16<<20, "-l5", "-n3", "-c64", "--assume-clean")
	spare := sparse(t, dir, "br-spare.img", 16<<20)
	all := append(append([]string(nil), devs...), spare)
	d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_RESHAPE_PAUSE=checkpoint")
	uri := "nbd+unix:///?socket=" + d.socket()
	data := nbdWrite(t, uri, 8<<20)
	if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
		t.Fatalf("--add: exit %d %s", code, errs)
	}
	bu := filepath.Join(dir, "backup")
	done := growAsync([]string{"--grow", md, "-n4", "--backup-file", bu, "--run-dir", runDir})
	if p, pos, rec := waitReshapePause(t, d); p != "checkpoint" || pos == 0 || rec != 0 {
		t.Fatalf("paused at %s %d %d, want the critical section's checkpoint (recorded 0)", p, pos, rec)
	}
	killDuringGrow(t, d, done)
	_, ex, _ := mdtool(t, "examine", devs[0])
	if !strings.Contains(ex, "Reshape pos'n : 0\n") || strings.Contains(ex, "New Offset") {
		t.Fatalf("examine after the kill (want an in-place reshape at 0):\n%s", ex)
	}
	args := append([]string{"--assemble", "--foreground", md, "--run-dir", runDir}, all...)
	if code, _, errs := mdtool(t, args...); code != 1 ||
		!strings.Contains(errs, "mdtool: Failed to restore critical section for reshape, sorry.\n       Possibly you needed to specify the --backup-file\n") {
		t.Fatalf("assemble without the backup file: exit %d %q", code, errs)
	}
	d = startDaemon(t, runDir, md, append([]string{"--backup-file=" + bu}, all...))
	defer d.stop()
	reshapeFinished(t, runDir, md)
	if got := detailJSONOf(t, runDir, md); got["raid_devices"] != float64(4) {
		t.Errorf("after the restart: raid_devices %v", got["raid_devices"])
	}
	if b := nbdRead(t, uri, len(data)); !bytes.Equal(b, data) {
		t.Error("the data read back differs")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(bu); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backup file is still there after the reshape")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGrowBackupSlideKill: a daemon killed (kill -9) in an in-place chunk
// change right after the backup file took a window half-way, before its
// stripes are written: the superblocks record such a reshape by md's rule
// only (every 10 s), so they may still hold a position below that
// window. assemble refuses the array without the backup file; with it
// the window is restored, the reshape goes on after it and finishes with
// the data intact.
func TestGrowBackupSlideKill(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/bsk"
	devs := mkArray(t, dir, md, 4, 16<<20, "-l5", "-n4", "-c64", "--assume-clean")
	d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_RESHAPE_PAUSE=backup:0.5")
	uri := "nbd+unix:///?socket=" + d.socket()
	data := nbdWrite(t, uri, 40<<20)
	bu := filepath.Join(dir, "backup")
	done := growAsync([]string{"--grow", md, "--chunk=128", "--backup-file", bu, "--run-dir", runDir})
	p, pos, win := waitReshapePause(t, d)
	if p != "backup" || win == 0 || pos <= win {
		t.Fatalf("paused at %s %d %d, want a window's backup half-way", p, pos, win)
	}
	killDuringGrow(t, d, done)
	_, ex, _ := mdtool(t, "examine", devs[0])
	m := regexp.MustCompile(`Reshape pos'n : (\d+)`).FindStringSubmatch(ex)
	if m == nil {
		t.Fatalf("examine after the kill (want a reshape in progress):\n%s", ex)
	}
	if k, _ := strconv.ParseUint(m[1], 10, 64); k*2 > win {
		t.Fatalf("the superblocks record %d sectors, beyond the window backed up at %d", k*2, win)
	} else {
		t.Logf("killed with the window [%d, %d) in the backup, the superblocks at %d", win, pos, k*2)
	}
	args := append([]string{"--assemble", "--foreground", md, "--run-dir", runDir}, devs...)
	if code, _, errs := mdtool(t, args...); code != 1 || !strings.Contains(errs, "Failed to restore critical section") {
		t.Fatalf("assemble without the backup file: exit %d %q", code, errs)
	}
	d = startDaemon(t, runDir, md, append([]string{"--backup-file=" + bu}, devs...))
	defer d.stop()
	reshapeFinished(t, runDir, md)
	if got := detailJSONOf(t, runDir, md); fmt.Sprint(got["chunk_size_kib"]) != "128" {
		t.Errorf("after the restart: chunk %v", got["chunk_size_kib"])
	}
	if b := nbdRead(t, uri, len(data)); !bytes.Equal(b, data) {
		t.Error("the data read back differs")
	}
}

// killDuringGrow kills the daemon (kill -9) while the grow started by
// growAsync waits on it, and waits for that grow to return.
func killDuringGrow(t *testing.T, d *daemonProc, growDone chan int) {
	t.Helper()
	d.kill()
	select {
	case <-growDone:
	case <-time.After(2 * time.Minute):
		t.Fatal("grow did not return after the daemon was killed")
	}
}
