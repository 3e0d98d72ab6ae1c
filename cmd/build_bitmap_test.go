package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/daemon"
)

// TestBuildBitmapArgs: mdadm 4.2's refusals of --bitmap, --bitmap-chunk
// and --delay in build mode, their words and exit statuses; none writes
// the bitmap file but the raid10 build that fails after creating it
// (mdadm 4.2 leaves it).
func TestBuildBitmapArgs(t *testing.T) {
	dir := t.TempDir()
	a, b := sparse(t, dir, "a.img", 4<<20), sparse(t, dir, "b.img", 4<<20)
	c, d := sparse(t, dir, "c.img", 4<<20), sparse(t, dir, "d.img", 4<<20)
	bmf := filepath.Join(dir, "bm")
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
		kept bool // the bitmap file was created and stays
	}{
		{[]string{"-l1", "-n2", "-bbm", a, b}, 2, "mdtool: bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'bm'\n", false},
		{[]string{"-l1", "-n2", "-b" + bmf, "-d0", a, b}, 2, "mdtool: invalid delay: 0\n", false},
		{[]string{"-l1", "-n2", "-b" + bmf, "--bitmap-chunk=3", a, b}, 2, "mdtool: invalid bitmap chunksize: 3\n", false},
		{[]string{"-l1", "-n2", "--bitmap=internal", a, b}, 1, "mdtool: 'internal' and 'clustered' bitmaps not supported with --build\n", false},
		{[]string{"-l1", "-b" + bmf, a, b}, 1, "mdtool: no raid-devices specified.\n", false},
		{[]string{"-l1", "-n3", "-b" + bmf, a, b}, 1, "mdtool: requested 3 devices in array but listed 2\n", false},
		{[]string{"-l0", "-n2", "-b" + bmf, a, b}, 1, "mdtool: bitmaps not meaningful with level raid0\n", false},
		{[]string{"-llinear", "-n2", "-b" + bmf, a, b}, 1, "mdtool: bitmaps not meaningful with level linear\n", false},
		// Build's CreateBitmap covers one member ("wrong for RAID10"):
		// md finds the file too short for the array's chunks; the
		// file stays, as mdadm leaves it
		{[]string{"-l10", "-n4", "-c64", "-b" + bmf, "--foreground", a, b, c, d}, 1, "mdtool: RUN_ARRAY failed: No space left on device\n", true},
		// raid10 without a chunk: Build gives md chunk 0, raid10
		// refuses it (EINVAL) after the file was made
		{[]string{"-l10", "-n2", "-b" + bmf, "--foreground", a, b}, 1, "mdtool: RUN_ARRAY failed: Invalid argument\n", true},
		// a non-power-of-2 chunk: mdadm's hint after RUN_ARRAY fails
		{[]string{"-l10", "-n2", "-c12", "--foreground", a, b}, 1, "mdtool: RUN_ARRAY failed: Invalid argument\n       Problem may be that chunk size is not a power of 2\n", false},
		// a file that is no bitmap: md_bitmap_read_sb's EINVAL (the
		// file is the user's: it stays)
		{[]string{"-l1", "-n2", "-b" + junk, "--foreground", a, b}, 1, "mdtool: RUN_ARRAY failed: Invalid argument\n", false},
		// a member that cannot be opened: no file is left behind
		{[]string{"-l1", "-n2", "-b" + bmf, "--foreground", a, filepath.Join(dir, "nothere.img")}, 1, "", false},
		// an NBD member is not sized before the daemon dials it: no
		// file is made for it
		{[]string{"-l1", "-n2", "-b" + bmf, "--foreground", a, "nbd+unix:///?socket=" + filepath.Join(dir, "no.sock")}, 1,
			"mdtool: Cannot open nbd+unix:///?socket=" + filepath.Join(dir, "no.sock") + ": No such file or directory\n", false},
	} {
		args := append([]string{"-B", "/dev/md0"}, tc.args...)
		code, _, errs := mdtool(t, append(args, "--run-dir", filepath.Join(dir, "run"))...)
		if code != tc.code || tc.msg != "" && errs != tc.msg {
			t.Errorf("%v: exit %d %q, want %d %q", tc.args, code, errs, tc.code, tc.msg)
		}
		if _, err := os.Stat(bmf); (err == nil) != tc.kept {
			t.Errorf("%v: the bitmap file exists: %v, want %v", tc.args, err == nil, tc.kept)
		}
		os.Remove(bmf)
	}
	if b, err := os.ReadFile(junk); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("junk"), 1024)) {
		t.Errorf("the file that is no bitmap was changed or removed: %v", err)
	}
}

// TestBuildBitmapFile: build --bitmap=FILE writes the file as mdadm 4.2's
// Build/CreateBitmap does (no UUID, the member's size, --bitmap-chunk,
// --delay), the resync clears it, a write to the degraded array dirties
// its chunks, and a --re-add of the failed and removed member recovers
// only those (the member's stale bytes elsewhere stay); building again
// reuses the file as it is.
func TestBuildBitmapFile(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	d1, d2 := sparse(t, dir, "d1.img", 8*mib), sparse(t, dir, "d2.img", 8*mib)
	bmf := filepath.Join(dir, "bm")
	md := "/dev/md/bb"
	s := serveBuild(t, runDir, md, "-l1", "-n2", "--bitmap="+bmf, "-d1", "--bitmap-chunk=64", d1, d2)
	raw, err := os.ReadFile(bmf)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bitmap.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.UUID != [16]byte{} || h.Version != bitmap.Version || h.ChunkSize != 64<<10 || h.DaemonSleep != 1 ||
		h.SyncSize != 8*mib/512 || len(raw) != bitmap.HeaderSize+(8*mib/(64<<10)+7)/8 {
		t.Fatalf("bitmap file: %+v, %d bytes", h, len(raw))
	}
	mdtool(t, "wait", "--run-dir", runDir, md)
	// the resync's bits are cleared by the bitmap daemon (--delay 1)
	// before the member fails (a degraded array keeps them)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, out, _ := mdtool(t, "-X", bmf)
		if strings.Contains(out, " 0 dirty") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resync's bits are still set:\n%s", out)
		}
	}
	if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--fail", d2); code != 0 {
		t.Fatalf("--fail: %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--remove", d2); code != 0 {
		t.Fatalf("--remove: %d %s", code, errs)
	}
	// 1 MiB written to the degraded array: 16 dirty chunks of 64 KiB
	pat := bytes.Repeat([]byte("build-bitmap"), mib/12+1)[:mib]
	src := filepath.Join(dir, "pat")
	os.WriteFile(src, pat, 0o600)
	run(t, "nbdcopy", "--", src, s.nbdURI())
	// the removed member's bytes outside those chunks, changed behind
	// the array's back: a guided recovery does not copy them
	stale := bytes.Repeat([]byte{0x5a}, 64<<10)
	f, err := os.OpenFile(d2, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(stale, 4*mib)
	f.Close()
	if _, out, _ := mdtool(t, "-X", bmf); !strings.Contains(out, "Bitmap : 128 bits (chunks), 16 dirty (12.5%)") {
		t.Errorf("-X after the degraded write:\n%s", out)
	}
	code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--re-add", d2)
	if code != 0 || errs != "mdtool: added "+d2+"\n" {
		t.Fatalf("--re-add: exit %d %q", code, errs)
	}
	mdtool(t, "wait", "--run-dir", runDir, md)
	s.stop()
	m1, _ := os.ReadFile(d1)
	m2, _ := os.ReadFile(d2)
	if !bytes.Equal(m1[:mib], pat) || !bytes.Equal(m2[:mib], pat) {
		t.Errorf("the written MiB is not on both members after the recovery")
	}
	if !bytes.Equal(m2[4*mib:4*mib+64<<10], stale) || bytes.Equal(m1[4*mib:4*mib+64<<10], stale) {
		t.Errorf("the recovery copied a chunk the bitmap had clean")
	}
	// built again with another --bitmap-chunk: the file is used as it is
	s = serveBuild(t, runDir, md, "-l1", "-n2", "--bitmap="+bmf, "--bitmap-chunk=128", d1, d2)
	s.stop()
	raw, _ = os.ReadFile(bmf)
	if h, err := bitmap.Parse(raw); err != nil || h.ChunkSize != 64<<10 || h.DaemonSleep != 1 {
		t.Errorf("built again: the bitmap file was rewritten: %+v %v", h, err)
	}
}

// TestBuildReAddFaulty: --re-add of a failed member still in a build
// array without a bitmap is md's state "re-add" (mdadm's first try): the
// member goes back into its role. md's raid1 would then skip the recovery
// (saved_raid_disk set, no fullsync) and leave the writes it missed out;
// the engine, which knows that writes went to the degraded array,
// recovers the whole role (engine/recover_readd.go, missedWrites).
func TestBuildReAddFaulty(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	d1, d2 := sparse(t, dir, "d1.img", 4*mib), sparse(t, dir, "d2.img", 4*mib)
	md := "/dev/md/bf"
	s := serveBuild(t, runDir, md, "-l1", "-n2", "--assume-clean", d1, d2)
	if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--fail", d2); code != 0 {
		t.Fatalf("--fail: %d %s", code, errs)
	}
	fillRandom(t, daemon.PathsFor(runDir, s.name).NBD(), 3*mib, 4096, 9)
	code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--re-add", d2)
	if code != 0 || errs != "mdtool: re-add "+d2+" to bf succeed\n" {
		t.Fatalf("--re-add: exit %d %q", code, errs)
	}
	mdtool(t, "wait", "--run-dir", runDir, md)
	_, out, _ := mdtool(t, "detail", "--run-dir", runDir, md)
	s.stop()
	m1, _ := os.ReadFile(d1)
	m2, _ := os.ReadFile(d2)
	if !bytes.Equal(m1, m2) || !strings.Contains(out, "active sync   "+d2) {
		t.Errorf("after the re-add: members equal %v, detail:\n%s", bytes.Equal(m1, m2), out)
	}
}

// TestBuildAddWriteMostly: mdadm 4.2's -B with -W and --write-behind and
// a bitmap file it creates (write_behind in the header, the member after
// -W write-mostly), then --add of a spare after a member failed and was
// removed: md's ADD_NEW_DISK of a non-persistent array makes it a spare
// (descriptor number 2) that recovers the missing role in full; nothing
// is written outside the data. --write-behind without --bitmap is
// refused as mdadm.c refuses it.
func TestBuildAddWriteMostly(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	d0, d1, d2 := sparse(t, dir, "d0.img", 4*mib), sparse(t, dir, "d1.img", 4*mib), sparse(t, dir, "d2.img", 4*mib+4096)
	code, _, errs := mdtool(t, "-B", "/dev/md0", "-l1", "-n2", "--write-behind=256", "--run-dir", runDir, d0, "-W", d1)
	if code != 1 || errs != "mdtool: write-behind mode requires a bitmap.\n" {
		t.Errorf("--write-behind without a bitmap: exit %d %q", code, errs)
	}
	code, _, errs = mdtool(t, "-B", "/dev/md0", "-l1", "-n2", "--write-behind=16384", "-b", filepath.Join(dir, "x"), d0, d1)
	if code != 2 || !strings.Contains(errs, "Invalid value for maximum outstanding write-behind writes: 16384.") {
		t.Errorf("--write-behind=16384: exit %d %q", code, errs)
	}
	bmf := filepath.Join(dir, "bm")
	md := "/dev/md/ba"
	s := serveBuild(t, runDir, md, "-l1", "-n2", "--assume-clean", "-b", bmf, "-d1", "--write-behind=100", d0, "-W", d1)
	raw, err := os.ReadFile(bmf)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := bitmap.Parse(raw); err != nil || h.WriteBehind != 100 || h.DaemonSleep != 1 {
		t.Errorf("bitmap file: %+v %v", h, err)
	}
	if _, out, _ := mdtool(t, "detail", "--run-dir", runDir, md); !strings.Contains(out, "active sync writemostly   "+d1) ||
		strings.Contains(out, "writemostly   "+d0) {
		t.Errorf("detail: -W marks the wrong members:\n%s", out)
	}
	for _, op := range []string{"--fail", "--remove"} {
		if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, op, d0); code != 0 {
			t.Fatalf("%s: %d %s", op, code, errs)
		}
	}
	fillRandom(t, daemon.PathsFor(runDir, s.name).NBD(), 3*mib, 4096, 11)
	code, _, errs = mdtool(t, "manage", "--run-dir", runDir, md, "--add", d2)
	if code != 0 || errs != "mdtool: added "+d2+"\n" {
		t.Fatalf("--add: exit %d %q", code, errs)
	}
	mdtool(t, "wait", "--run-dir", runDir, md)
	// a faulty member put back by --re-add (md's state "re-add") keeps
	// its write-mostly flag, as md keeps the rdev's
	if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--fail", d1); code != 0 {
		t.Fatalf("--fail: %d %s", code, errs)
	}
	if code, _, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--re-add", d1); code != 0 {
		t.Fatalf("--re-add: %d %s", code, errs)
	}
	mdtool(t, "wait", "--run-dir", runDir, md)
	_, out, _ := mdtool(t, "detail", "--run-dir", runDir, md)
	s.stop()
	if !strings.Contains(out, "active sync writemostly   "+d1) {
		t.Errorf("the re-added member lost write-mostly:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^ +2 +\S+ +\S+ +0 +active sync   ` + regexp.QuoteMeta(d2) + `$`).MatchString(out) {
		t.Errorf("the added spare is not number 2 in role 0:\n%s", out)
	}
	m1, _ := os.ReadFile(d1)
	m2, _ := os.ReadFile(d2)
	if !bytes.Equal(m1, m2[:4*mib]) || !bytes.Equal(m2[4*mib:], make([]byte, 4096)) {
		t.Errorf("after the recovery: members equal %v", bytes.Equal(m1, m2[:4*mib]))
	}
	if code, out, _ := mdtool(t, "examine", d2); code == 0 {
		t.Errorf("the added device has a superblock:\n%s", out)
	}
}
