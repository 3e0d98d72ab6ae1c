package cmd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
)

// dirtyOf is the dirty count of "mdtool -X FILE" (the mdadm tests' sed).
func dirtyOf(t *testing.T, bmf string) int {
	t.Helper()
	code, out, errs := mdtool(t, "-X", bmf)
	if code != 0 {
		t.Fatalf("-X %s: exit %d: %s", bmf, code, errs)
	}
	m := regexp.MustCompile(`Bitmap : \d+ bits \(chunks\), (\d+) dirty`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("-X %s:\n%s", bmf, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitDirty polls the file until its dirty count is want (the daemon's
// passes), with a generous deadline.
func waitDirty(t *testing.T, bmf string, want int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := dirtyOf(t, bmf)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d dirty, want %d", bmf, n, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBitmapFileCreateAssemble: create --bitmap=FILE writes mdadm's file
// and no internal bitmap; assemble --bitmap=FILE serves the array with
// the bitmap in the file (dirty after writes, cleared by the daemon),
// -D names the file; the refusals are mdadm's, with nothing written.
func TestBitmapFileCreateAssemble(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	bmf := filepath.Join(dir, "bitmap")
	md := "/dev/md/bmf"
	devs := mkArray(t, dir, md, 2, 16<<20, "-l1", "-n2", "--delay=1", "--bitmap", bmf)
	raw, err := os.ReadFile(bmf)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bitmap.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.ChunkSize != 4096 || h.DaemonSleep != 1 || h.Events != 0 || h.SyncSize == 0 ||
		uint64(len(raw)) != h.Bytes() || bytes.Count(raw[bitmap.HeaderSize:], []byte{0xff}) != len(raw)-bitmap.HeaderSize {
		t.Errorf("bitmap file: %+v, %d bytes", h, len(raw))
	}
	if _, ex, _ := mdtool(t, "-E", devs[0]); strings.Contains(ex, "Internal Bitmap") || !strings.Contains(ex, "Array UUID") {
		t.Errorf("-E of a member of an array with a bitmap file:\n%s", ex)
	}
	hash := sparseHash(t, devs[0])
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"create", md, "--run", "-l1", "-n2", "--bitmap=" + bmf, devs[0], devs[1]}, 1,
			"mdtool: bitmap file " + bmf + " already exists, use --force to overwrite\n"},
		{[]string{"create", md, "--run", "-l1", "-n2", "--bitmap=bm", devs[0], devs[1]}, 2,
			"mdtool: bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not 'bm'\n"},
		{[]string{"assemble", "--run-dir", runDir, md, "--bitmap=" + bmf + ".no", devs[0], devs[1]}, 2,
			"mdtool: cannot open bitmap file " + bmf + ".no: No such file or directory\n"},
	} {
		code, _, errs := mdtool(t, c.args...)
		if code != c.code || !strings.HasSuffix(errs, c.err) {
			t.Errorf("%v: exit %d %q, want %d %q", c.args, code, errs, c.code, c.err)
		}
	}
	if sparseHash(t, devs[0]) != hash {
		t.Error("a refused create wrote the members")
	}
	if b, _ := os.ReadFile(bmf); !bytes.Equal(b, raw) {
		t.Error("a refused create changed the bitmap file")
	}

	s := serve(t, runDir, md, "--bitmap="+bmf, devs[0], devs[1])
	if d := detailText(t, runDir, md); !strings.Contains(d, "     Intent Bitmap : "+bmf+"\n") ||
		!strings.Contains(d, "Consistency Policy : bitmap\n") {
		t.Errorf("detail:\n%s", d)
	}
	waitDirty(t, bmf, 0) // resync done, then the daemon's passes
	c, err := crashload.Dial(daemon.PathsFor(runDir, s.name).NBD())
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{0xa5}, 1<<20)
	for off := int64(0); off < 4<<20; off += 1 << 20 {
		if err := c.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if n := dirtyOf(t, bmf); n == 0 {
		t.Error("no dirty bit in the file after 4 MiB of writes")
	}
	waitDirty(t, bmf, 0)
	s.stop()
	if b, _ := os.ReadFile(bmf); len(b) != len(raw) {
		t.Errorf("the file is %d bytes, was %d", len(b), len(raw))
	}
	compareExamineBitmapFile(t, bmf)
	if _, ex, _ := mdtool(t, "-E", devs[1]); strings.Contains(ex, "Internal Bitmap") {
		t.Errorf("-E after serving with a bitmap file:\n%s", ex)
	}

	// a file of another array: refused at the start, as md's "bitmap
	// superblock UUID mismatch" fails RUN_ARRAY
	other := filepath.Join(dir, "other")
	odevs := mkArray(t, dir, "/dev/md/other", 2, 16<<20, "-l1", "-n2", "--bitmap", other)
	_ = odevs
	if s, code := tryServe(t, runDir, md, "--bitmap="+other, devs[0], devs[1]); s != nil || code == 0 {
		t.Fatalf("assemble with another array's bitmap file: exit %d", code)
	}
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", runDir, md, "--bitmap="+other, devs[0], devs[1])
	if want := "mdtool: failed to RUN_ARRAY /dev/md/bmf: Invalid argument\n"; code != 1 || !strings.HasSuffix(errs, want) {
		t.Errorf("assemble with another array's bitmap file: exit %d, stderr %q, want it to end %q", code, errs, want)
	}
}

// TestBitmapFileGrow is tests/05r1-grow-external's sequence: a bitmap
// file added to a running array, dirty after writes and cleared by the
// daemon, refused twice, then removed with --bitmap=none.
func TestBitmapFileGrow(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/bmg"
	devs := mkArray(t, dir, md, 2, 16<<20, "-l1", "-n2", "--assume-clean")
	s := serve(t, runDir, md, devs...)
	bmf := filepath.Join(dir, "bm")
	if code, out, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--bitmap="+bmf, "--delay=1"); code != 0 {
		t.Fatalf("grow --bitmap=%s: exit %d: %s%s", bmf, code, out, errs)
	}
	if d := detailText(t, runDir, md); !strings.Contains(d, "     Intent Bitmap : "+bmf+"\n") {
		t.Errorf("detail after the grow:\n%s", d)
	}
	waitDirty(t, bmf, 0)
	c, err := crashload.Dial(s.nbdURI()[len("nbd+unix:///?socket="):])
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{0x3c}, 1<<20)
	for off := int64(0); off < 8<<20; off += 1 << 20 {
		if err := c.WriteAt(p, off); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if n := dirtyOf(t, bmf); n < 400 {
		t.Errorf("%d dirty after 8 MiB of writes, want >= 400 (05r1-grow-external's bound)", n)
	}
	waitDirty(t, bmf, 0)
	for _, c := range []struct {
		args []string
		err  string
	}{
		// Grow_addbitmap asks GET_BITMAP_FILE first: a file named is
		// "already has a bitmap" whatever is asked for (mt-build-extra
		// shows mdadm 4.2 saying it for --bitmap=internal)
		{[]string{"--bitmap=internal"}, "mdtool: " + md + " already has a bitmap (" + bmf + ")\n"},
		{[]string{"--bitmap=" + bmf + "2"}, "mdtool: " + md + " already has a bitmap (" + bmf + ")\n"},
	} {
		args := append([]string{"grow", "--run-dir", runDir, md}, c.args...)
		if code, _, errs := mdtool(t, args...); code != 1 || errs != c.err {
			t.Errorf("%v: exit %d %q, want 1 %q", c.args, code, errs, c.err)
		}
	}
	if code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--bitmap=none"); code != 0 {
		t.Fatalf("--bitmap=none: exit %d %s", code, errs)
	}
	if d := detailText(t, runDir, md); strings.Contains(d, "Intent Bitmap") {
		t.Errorf("detail after --bitmap=none:\n%s", d)
	}
	// the file is left, and a new grow refuses it without --force
	if code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--bitmap="+bmf); code != 1 ||
		errs != "mdtool: bitmap file "+bmf+" already exists, use --force to overwrite\n" {
		t.Errorf("grow onto an existing file: exit %d %q", code, errs)
	}
	if code, _, errs := mdtool(t, "grow", "--run-dir", runDir, md, "--bitmap="+bmf, "--force"); code != 0 {
		t.Errorf("grow --force onto an existing file: exit %d %q", code, errs)
	}
	s.stop()
	if _, ex, _ := mdtool(t, "-E", devs[0]); strings.Contains(ex, "Internal Bitmap") {
		t.Errorf("-E after grow with a bitmap file:\n%s", ex)
	}
}

// TestBitmapFileConfig: the bitmap= word of an ARRAY line gives the
// array its bitmap file at assemble --scan; one that does not open is
// mdadm's "Could not open bitmap file".
func TestBitmapFileConfig(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	bmf := filepath.Join(dir, "c.bm")
	md := "/dev/md/bmc"
	mkArray(t, dir, md, 2, 16<<20, "-l1", "-n2", "--assume-clean", "--bitmap="+bmf)
	conf := filepath.Join(dir, "mdadm.conf")
	write := func(bm string) {
		text := "DEVICE " + filepath.Join(dir, "*.img") + "\nARRAY " + md + " name=testhost:bmc bitmap=" + bm + "\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(bmf + ".missing")
	if s, code := tryServe(t, runDir, md, "--scan", "--config", conf); s != nil || code == 0 {
		t.Errorf("assemble with a missing bitmap= file: exit %d", code)
	}
	write(bmf)
	s := serve(t, runDir, md, "--scan", "--config", conf)
	if d := detailText(t, runDir, md); !strings.Contains(d, "     Intent Bitmap : "+bmf+"\n") {
		t.Errorf("detail:\n%s", d)
	}
	s.stop()
}

// compareExamineBitmapFile checks that mdtool -X prints what host mdadm
// 4.2 -X prints for a bitmap file.
func compareExamineBitmapFile(t *testing.T, bmf string) {
	t.Helper()
	requireHostMdadm(t)
	want, err := exec.Command("mdadm", "-X", bmf).CombinedOutput()
	if err != nil {
		t.Fatalf("mdadm -X %s: %v %s", bmf, err, want)
	}
	code, out, errs := mdtool(t, "-X", bmf)
	if code != 0 || out != string(want) {
		t.Errorf("-X %s: mdtool exit %d\n%s%s\nmdadm:\n%s", bmf, code, out, errs, want)
	}
}
