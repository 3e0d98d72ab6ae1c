package cmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/daemon"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of an
// in-process daemon and the test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func daemonEnv() (*Env, *lockedBuffer, *lockedBuffer) {
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	return &Env{
		Stdin:    strings.NewReader(""),
		Stdout:   out,
		Stderr:   errb,
		Now:      time.Now,
		Hostname: func() (string, error) { return "testhost", nil },
	}, out, errb
}

// mdtool runs one command in-process and returns its exit status and
// output.
func mdtool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env, out, errb := daemonEnv()
	code := Main(args, env)
	return code, out.String(), errb.String()
}

// mkArray creates an array with mdtool create on n sparse files of size
// bytes in dir and returns their paths.
func mkArray(t *testing.T, dir, md string, n int, size int64, opts ...string) []string {
	t.Helper()
	var devs []string
	for i := 0; i < n; i++ {
		devs = append(devs, sparse(t, dir, fmt.Sprintf("%s-d%d.img", filepath.Base(md), i), size))
	}
	args := append([]string{"create", md, "--run", "--homehost=testhost"}, opts...)
	args = append(args, devs...)
	if code, _, errs := mdtool(t, args...); code != 0 {
		t.Fatalf("create %v: exit %d: %s", args, code, errs)
	}
	return devs
}

// hashAll hashes every file: its size, its allocated extents and their
// contents (any write changes one of them; holes are not read).
func hashAll(t *testing.T, paths []string) map[string][32]byte {
	t.Helper()
	m := map[string][32]byte{}
	for _, p := range paths {
		m[p] = sparseHash(t, p)
	}
	return m
}

func sparseHash(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h := sha256.New()
	fmt.Fprintf(h, "size %d\n", fi.Size())
	fd := int(f.Fd())
	var off int64
	for off < fi.Size() {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "extent %d %d\n", data, hole)
		if _, err := io.Copy(h, io.NewSectionReader(f, data, hole-data)); err != nil {
			t.Fatal(err)
		}
		off = hole
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// served is an array served in-process by `assemble --foreground`.
type served struct {
	t      *testing.T
	runDir string
	md     string
	name   string
	done   chan int
	stderr *lockedBuffer
}

// serve runs `assemble --foreground` in a goroutine and waits until the
// array answers on its control socket. It fails the test when assemble
// ends instead.
func serve(t *testing.T, runDir, md string, args ...string) *served {
	t.Helper()
	s, code := tryServe(t, runDir, md, args...)
	if s == nil {
		t.Fatalf("assemble %s %v: exit %d", md, args, code)
	}
	return s
}

// tryServe is serve returning (nil, exit status) when assemble ends.
func tryServe(t *testing.T, runDir, md string, args ...string) (*served, int) {
	t.Helper()
	env, _, errb := daemonEnv()
	full := append([]string{"assemble", "--foreground", "--run-dir", runDir, md}, args...)
	s := &served{t: t, runDir: runDir, md: md, done: make(chan int, 1), stderr: errb}
	s.name, _ = daemon.ArrayName(md)
	go func() { s.done <- Main(full, env) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case code := <-s.done:
			t.Logf("assemble stderr:\n%s", errb.String())
			return nil, code
		default:
		}
		if cl, err := daemon.Dial(runDir, s.name); err == nil {
			_, err := cl.Call(context.Background(), daemon.Request{Op: daemon.OpPing})
			cl.Close()
			// The control socket answers just before assemble says so.
			if err == nil && strings.Contains(errb.String(), " has been started with ") {
				t.Cleanup(func() { s.stopIfRunning() })
				return s, 0
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("assemble %s did not become ready: %s", md, errb.String())
	return nil, 0
}

// nbdURI is the NBD URI of the array's default unix socket.
func (s *served) nbdURI() string {
	return "nbd+unix:///?socket=" + daemon.PathsFor(s.runDir, s.name).NBD()
}

// stop runs `mdtool stop` and waits for the daemon to end with status 0.
func (s *served) stop() {
	s.t.Helper()
	code, _, errs := mdtool(s.t, "stop", "--run-dir", s.runDir, s.md)
	if code != 0 {
		s.t.Fatalf("stop %s: exit %d: %s", s.md, code, errs)
	}
	if !strings.Contains(errs, "stopped "+s.md) {
		s.t.Errorf("stop said %q, want %q", errs, "stopped "+s.md)
	}
	s.wait()
}

// stopAfterRelease stops the array once the kernel has let go of its FUSE
// file: a detached loop device closes its backing file, and FUSE sends
// the release, asynchronously, so stop may still find the file open for a
// while and refuse ("Cannot get exclusive access"); it is asked again
// until it stops, for at most a minute.
func (s *served) stopAfterRelease() {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, errs := mdtool(s.t, "stop", "--run-dir", s.runDir, s.md)
		if code == 0 {
			s.wait()
			return
		}
		if !strings.Contains(errs, "Cannot get exclusive access") || time.Now().After(deadline) {
			s.t.Fatalf("stop %s: exit %d: %s", s.md, code, errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *served) wait() {
	s.t.Helper()
	select {
	case code := <-s.done:
		if code != 0 {
			s.t.Errorf("assemble --foreground ended with %d: %s", code, s.stderr.String())
		}
		s.done <- code
	case <-time.After(60 * time.Second):
		s.t.Fatalf("the daemon of %s did not end", s.md)
	}
}

func (s *served) stopIfRunning() {
	select {
	case code := <-s.done:
		s.done <- code
		return
	default:
	}
	if cl, err := daemon.Dial(s.runDir, s.name); err == nil {
		cl.Call(context.Background(), daemon.Request{Op: daemon.OpStop})
		cl.Close()
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
}

// writeAt writes p into a member file (test helper).
func writeAt(t *testing.T, path string, p []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// TestAssembleRefusalsWriteNothing assembles bad member sets and checks
// the exit status, mdadm's message, and that no member changed.
func TestAssembleRefusalsWriteNothing(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	r5 := mkArray(t, dir, "/dev/md/r5", 4, size, "-l5", "-n4", "--assume-clean")
	other := mkArray(t, dir, "/dev/md/other", 2, size, "-l1", "-n2", "--assume-clean")
	blank := sparse(t, dir, "blank.img", size)
	// A raid6 created with one slot missing: its superblocks record the
	// array as degraded (4 working of 5).
	var r6 []string
	for i := 0; i < 4; i++ {
		r6 = append(r6, sparse(t, dir, fmt.Sprintf("r6-d%d.img", i), size))
	}
	if code, _, errs := mdtool(t, append([]string{"create", "/dev/md/r6", "--run", "--homehost=testhost", "--assume-clean",
		"-l6", "-n5"}, append(r6, "missing")...)...); code != 0 {
		t.Fatalf("create r6: exit %d: %s", code, errs)
	}

	// A stale member: r5 ran degraded on three members and was written,
	// so the fourth is behind.
	stale := mkArray(t, dir, "/dev/md/st", 4, size, "-l5", "-n4", "--assume-clean")
	s := serve(t, runDir, "/dev/md/st", "--run", stale[0], stale[1], stale[2])
	nbdWrite(t, s.nbdURI(), 1<<20)
	s.stop()

	cases := []struct {
		name string
		args []string
		code int
		msgs []string
	}{
		{"members of different arrays", []string{"/dev/md/r5", r5[0], r5[1], other[0], r5[2], r5[3]}, 1,
			[]string{"superblock on " + other[0] + " doesn't match others - assembly aborted"}},
		// After a member was accepted, mdadm 4.2 loads the next devices
		// with its superblock type (load_super1 with the device name).
		{"no superblock", []string{"/dev/md/r5", r5[0], blank, r5[1]}, 1,
			[]string{"No super block found on " + blank + " (Expected magic a92b4efc, got 00000000)", "no RAID superblock on " + blank,
				blank + " has no superblock - assembly aborted"}},
		{"no superblock first", []string{"/dev/md/r5", blank, r5[0], r5[1]}, 1,
			[]string{"no recogniseable superblock on " + blank, blank + " has no superblock - assembly aborted"}},
		{"missing file", []string{"/dev/md/r5", r5[0], filepath.Join(dir, "nope.img")}, 1,
			[]string{"cannot open device " + filepath.Join(dir, "nope.img") + ": No such file or directory"}},
		{"one missing without --run", []string{"/dev/md/r5", r5[0], r5[1], r5[2]}, 1,
			[]string{"/dev/md/r5 assembled from 3 drives - need all 4 to start it (use --run to insist)."}},
		{"one more missing than the superblocks record", []string{"/dev/md/r6", r6[0], r6[1], r6[3]}, 1,
			[]string{"/dev/md/r6 assembled from 3 drives - need 4 to start (use --run to insist)."}},
		{"newly degraded --no-degraded", []string{"/dev/md/r5", "--no-degraded", r5[0], r5[1], r5[3]}, 1,
			[]string{"--no-degraded not meaningful without a --scan assembly."}},
		{"too few", []string{"/dev/md/r5", r5[0], r5[1]}, 1,
			[]string{"/dev/md/r5 assembled from 2 drives - not enough to start the array."}},
		{"too few with --run", []string{"/dev/md/r5", "--run", r5[0], r5[1]}, 1,
			[]string{"failed to RUN_ARRAY /dev/md/r5: Input/output error", "Not enough devices to start the array."}},
		{"stale member and too few fresh ones", []string{"/dev/md/st", "-v", stale[1], stale[2], stale[3]}, 1,
			[]string{stale[3] + " is not fresh (events 0, the array is at ",
				"/dev/md/st assembled from 2 drives - not enough to start the array."}},
		{"stale member with --run", []string{"/dev/md/st", "-v", "--run", stale[1], stale[2], stale[3]}, 1,
			[]string{stale[3] + " is not fresh", "Not enough devices to start the array."}},
		{"wrong uuid", []string{"/dev/md/r5", "--uuid", "01234567:89abcdef:01234567:89abcdef", r5[0], r5[1], r5[2], r5[3]}, 2,
			[]string{r5[0] + " has wrong uuid.", r5[3] + " has wrong uuid."}},
		{"no identity in config", []string{"/dev/md/r5", "--config", "none"}, 1,
			[]string{"/dev/md/r5 not identified in config file."}},
	}
	all := append(append(append([]string{}, r5...), other...), stale...)
	all = append(append(all, r6...), blank)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := hashAll(t, all)
			args := append([]string{"assemble", "--foreground", "--run-dir", runDir}, tc.args...)
			code, _, errs := mdtool(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, errs)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(errs, "mdtool: "+m) {
					t.Errorf("stderr lacks %q:\n%s", m, errs)
				}
			}
			if strings.Contains(errs, "has been started") {
				t.Errorf("the array was started:\n%s", errs)
			}
			after := hashAll(t, all)
			for p, h := range before {
				if after[p] != h {
					t.Errorf("%s changed", p)
				}
			}
			if names, _ := daemon.Names(runDir); len(names) != 0 {
				t.Errorf("daemons left running: %v", names)
			}
		})
	}
}

// nbdWrite writes n random bytes at offset 0 through NBD and returns them.
func nbdWrite(t *testing.T, uri string, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	sum := sha256.Sum256([]byte(t.Name()))
	for i := range data {
		data[i] ^= sum[i%32]
	}
	src := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "nbdcopy", "--", src, uri)
	return data
}

// nbdRead reads n bytes at offset 0 through NBD.
func nbdRead(t *testing.T, uri string, n int) []byte {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "read")
	run(t, "nbdcopy", "--", uri, dst)
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < n {
		t.Fatalf("read %d bytes, want at least %d", len(b), n)
	}
	return b[:n]
}

// TestAssembleMessages checks what assemble says when it starts arrays
// with some members missing, stale or spare.
func TestAssembleMessages(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	r5 := mkArray(t, dir, "/dev/md/m5", 4, size, "-l5", "-n4", "--assume-clean")
	// Degraded start with --run: "(out of 4)".
	s := serve(t, runDir, "/dev/md/m5", "--run", r5[0], r5[1], r5[3])
	if got := s.stderr.String(); !strings.Contains(got, "mdtool: /dev/md/m5 has been started with 3 drives (out of 4).\n") {
		t.Errorf("stderr:\n%s", got)
	}
	// A second assemble of the same array: its members are busy.
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", runDir, "/dev/md/m5", r5[0], r5[1], r5[3])
	if code != 2 || !strings.Contains(errs, r5[0]+" is busy - skipping") {
		t.Errorf("second assemble: exit %d:\n%s", code, errs)
	}
	// The free member of an active array.
	code, _, errs = mdtool(t, "assemble", "--foreground", "--run-dir", runDir, "--run", "/dev/md/other", r5[2])
	if code != 1 || !strings.Contains(errs, "Found some drive for an array that is already active: /dev/md/m5") ||
		!strings.Contains(errs, "giving up.") {
		t.Errorf("assemble of a member of an active array: exit %d:\n%s", code, errs)
	}
	s.stop()

	// --force, like mdadm's, starts an array newly degraded without --run.
	s = serve(t, runDir, "/dev/md/m5", "--force", r5[0], r5[1], r5[3])
	if got := s.stderr.String(); !strings.Contains(got, "mdtool: /dev/md/m5 has been started with 3 drives (out of 4).\n") {
		t.Errorf("--force: stderr:\n%s", got)
	}
	s.stop()

	// Starting degraded without writing changes no superblock (as in
	// md): all four members are still current.
	s = serve(t, runDir, "/dev/md/m5", r5[0], r5[1], r5[2], r5[3])
	if got := s.stderr.String(); !strings.Contains(got, "mdtool: /dev/md/m5 has been started with 4 drives.\n") {
		t.Errorf("stderr:\n%s", got)
	}
	s.stop()

	// A stale member: the array was written without it. The others
	// record its slot as empty, so the array starts without --run (as
	// with mdadm), and assemble says which member it left out and why.
	st := mkArray(t, dir, "/dev/md/stale", 3, size, "-l5", "-n3", "--assume-clean")
	s = serve(t, runDir, "/dev/md/stale", "--run", st[0], st[1])
	nbdWrite(t, s.nbdURI(), 1<<20)
	s.stop()
	s = serve(t, runDir, "/dev/md/stale", "-v", st[2], st[1], st[0])
	got := s.stderr.String()
	if !strings.Contains(got, "mdtool: "+st[2]+" is not fresh (events 0, the array is at ") ||
		!strings.Contains(got, "mdtool: /dev/md/stale has been started with 2 drives (out of 3).\n") {
		t.Errorf("stderr:\n%s", got)
	}
	s.stop()

	// An array created with a slot missing: the superblocks record it as
	// degraded, so it starts without --run (mdadm: working_disks).
	cd := []string{sparse(t, dir, "cd-d0.img", size), sparse(t, dir, "cd-d1.img", size)}
	if code, _, errs := mdtool(t, "create", "/dev/md/cd", "--run", "--homehost=testhost", "-l1", "-n3", cd[0], "missing", cd[1]); code != 0 {
		t.Fatalf("create cd: exit %d: %s", code, errs)
	}
	s = serve(t, runDir, "/dev/md/cd", cd...)
	if got := s.stderr.String(); !strings.Contains(got, "mdtool: /dev/md/cd has been started with 2 drives (out of 3).\n") {
		t.Errorf("created degraded: stderr:\n%s", got)
	}
	s.stop()

	// Split brain: each half of a raid1 was written alone. The first
	// freshest member wins; the other records it as failed.
	split := mkArray(t, dir, "/dev/md/split", 2, size, "-l1", "-n2", "--assume-clean")
	for _, d := range split {
		s = serve(t, runDir, "/dev/md/split", "--run", d)
		nbdWrite(t, s.nbdURI(), 1<<20)
		s.stop()
	}
	s = serve(t, runDir, "/dev/md/split", split[1], split[0])
	got = s.stderr.String()
	if !strings.Contains(got, "mdtool: ignoring "+split[0]+" as it reports "+split[1]+" as failed\n") ||
		!strings.Contains(got, "mdtool: /dev/md/split has been started with 1 drive (out of 2).\n") {
		t.Errorf("stderr:\n%s", got)
	}
	s.stop()

	// Spares.
	r1 := mkArray(t, dir, "/dev/md/m1", 3, size, "-l1", "-n2", "-x1", "--assume-clean")
	s = serve(t, runDir, "/dev/md/m1", r1...)
	if got := s.stderr.String(); !strings.Contains(got, "mdtool: /dev/md/m1 has been started with 2 drives and 1 spare.\n") {
		t.Errorf("stderr:\n%s", got)
	}
	s.stop()
}

// TestAssembleScan assembles from an mdadm.conf: DEVICE globs and ARRAY
// lines by uuid and by name, and auto-assembly without ARRAY lines.
func TestAssembleScan(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	a := mkArray(t, dir, "/dev/md/alpha", 2, size, "-l1", "-n2", "--assume-clean")
	b := mkArray(t, dir, "/dev/md/beta", 3, size, "-l5", "-n3", "--assume-clean")
	_ = b
	code, out, errs := mdtool(t, "examine", "--scan", "--config=none", a[0])
	if code != 0 {
		t.Fatalf("examine: %d %s", code, errs)
	}
	uuid := regexp.MustCompile(`UUID=(\S+)`).FindStringSubmatch(out)[1]
	conf := filepath.Join(dir, "mdadm.conf")
	os.WriteFile(conf, []byte("DEVICE "+filepath.Join(dir, "*.img")+"\n"+
		"ARRAY /dev/md/alpha UUID="+uuid+"\n"+
		"ARRAY /dev/md/beta name=testhost:beta\n"), 0o600)

	// --scan with one md device: only that array.
	s := serve(t, runDir, "/dev/md/alpha", "--scan", "--config", conf)
	if got := s.stderr.String(); !strings.Contains(got, "/dev/md/alpha has been started with 2 drives.") {
		t.Errorf("stderr:\n%s", got)
	}
	if names, _ := daemon.Names(runDir); strings.Join(names, ",") != "alpha" {
		t.Errorf("running: %v", names)
	}
	s.stop()

	// --scan alone: every ARRAY line, one process.
	env, _, errb := daemonEnv()
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"assemble", "--foreground", "--scan", "--config", conf, "--run-dir", runDir}, env)
	}()
	waitNames(t, runDir, "alpha,beta", done, errb)
	code, out, errs = mdtool(t, "detail", "--scan", "--run-dir", runDir)
	if code != 0 || !strings.Contains(out, "ARRAY /dev/md/alpha metadata=1.2 name=testhost:alpha UUID="+uuid+"\n") ||
		!strings.Contains(out, "ARRAY /dev/md/beta metadata=1.2 name=testhost:beta UUID=") {
		t.Errorf("detail --scan: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = mdtool(t, "stop", "--scan", "-v", "--run-dir", runDir)
	if code != 0 || !strings.Contains(errs, "stopped /dev/md/alpha") || !strings.Contains(errs, "stopped /dev/md/beta") {
		t.Errorf("stop --scan: exit %d: %s", code, errs)
	}
	if c := <-done; c != 0 {
		t.Errorf("assemble --scan ended with %d: %s", c, errb.String())
	}

	// Auto-assembly: no ARRAY lines; arrays are named after their names.
	os.WriteFile(conf, []byte("DEVICE "+filepath.Join(dir, "*.img")+"\n"), 0o600)
	env, _, errb = daemonEnv()
	done = make(chan int, 1)
	go func() {
		done <- Main([]string{"assemble", "--foreground", "--scan", "--config", conf, "--run-dir", runDir}, env)
	}()
	waitNames(t, runDir, "alpha,beta", done, errb)
	if code, _, errs := mdtool(t, "stop", "--scan", "--run-dir", runDir); code != 0 {
		t.Errorf("stop --scan: %d %s", code, errs)
	}
	if c := <-done; c != 0 {
		t.Errorf("auto-assembly ended with %d: %s", c, errb.String())
	}
}

// waitNames waits for the arrays want (names, comma-separated) to run;
// stderr, when given, is the assembling process's, shown on failure.
func waitNames(t *testing.T, runDir, want string, done chan int, stderr ...*lockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var names []string
	for time.Now().Before(deadline) {
		select {
		case c := <-done:
			t.Fatalf("assemble ended with %d", c)
		default:
		}
		names, _ = daemon.Names(runDir)
		ok := strings.Join(names, ",") == want
		for _, n := range names {
			if _, err := queryStatus(runDir, n); err != nil {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	var errs string
	for _, b := range stderr {
		errs += b.String()
	}
	t.Fatalf("arrays %s did not come up (running: %v); the assembly said:\n%s", want, names, errs)
}

// TestStaleSocketDoesNotBlock leaves the files of a daemon that died
// (lock file, control and NBD sockets nobody answers on) and assembles.
func TestStaleSocketDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/ss", 2, 32<<20, "-l1", "-n2", "--assume-clean")
	os.MkdirAll(runDir, 0o755)
	p := daemon.PathsFor(runDir, "ss")
	for _, path := range []string{p.Control(), p.NBD()} {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			t.Fatal(err)
		}
		unix.Close(fd) // bound, never listened on: a dead daemon's socket
	}
	os.WriteFile(p.Lock(), []byte("12345\n"), 0o600)
	s := serve(t, runDir, "/dev/md/ss", devs...)
	fi, err := os.Stat(p.Control())
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("control socket: %v %v", fi.Mode(), err)
	}
	s.stop()
	for _, path := range []string{p.Control(), p.NBD()} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s left behind", path)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := execCommand(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func execCommand(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// copyFile copies a (sparse) member image.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	run(t, "cp", "--sparse=always", src, dst)
}

// TestAssembleForce: two members of a raid5 are older than the others, so
// the array cannot start; --force brings their event counts up (writing
// their superblocks, as mdadm does) and starts it.
func TestAssembleForce(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/fo", 4, 32<<20, "-l5", "-n4", "--assume-clean")
	copyFile(t, devs[2], devs[2]+".old")
	copyFile(t, devs[3], devs[3]+".old")
	s := serve(t, runDir, "/dev/md/fo", devs...)
	nbdWrite(t, s.nbdURI(), 1<<20)
	s.stop()
	copyFile(t, devs[2]+".old", devs[2])
	copyFile(t, devs[3]+".old", devs[3])
	before := hashAll(t, devs)
	code, _, errs := mdtool(t, append([]string{"assemble", "--foreground", "-v", "--run-dir", runDir, "/dev/md/fo"}, devs...)...)
	if code != 1 || !strings.Contains(errs, "mdtool: "+devs[2]+" is not fresh (events 0, the array is at ") ||
		!strings.Contains(errs, "mdtool: /dev/md/fo assembled from 2 drives - not enough to start the array.\n") {
		t.Errorf("without --force: exit %d:\n%s", code, errs)
	}
	for p, h := range hashAll(t, devs) {
		if before[p] != h {
			t.Errorf("%s changed without --force", p)
		}
	}
	s = serve(t, runDir, "/dev/md/fo", append([]string{"--force"}, devs...)...)
	got := s.stderr.String()
	re := regexp.MustCompile(`mdtool: forcing event count in (\S+)\((\d)\) from 0 up to [1-9]\d*\n`)
	m := re.FindAllStringSubmatch(got, -1)
	if len(m) != 2 || m[0][1] != devs[2] || m[1][1] != devs[3] ||
		!strings.Contains(got, "mdtool: /dev/md/fo has been started with 4 drives.\n") {
		t.Errorf("with --force:\n%s", got)
	}
	s.stop()
	// The forced members' superblocks were rewritten; the array is whole.
	s = serve(t, runDir, "/dev/md/fo", devs...)
	if got := s.stderr.String(); !strings.Contains(got, "has been started with 4 drives.\n") {
		t.Errorf("after --force:\n%s", got)
	}
	s.stop()
}

// TestSparseHashSeesWrites makes sure the "nothing written" checks can
// fail: a write into a hole or into data changes the hash.
func TestSparseHashSeesWrites(t *testing.T) {
	dir := t.TempDir()
	p := sparse(t, dir, "f.img", 8<<20)
	writeAt(t, p, []byte("data"), 1<<20)
	h0 := sparseHash(t, p)
	writeAt(t, p, []byte{0}, 5<<20) // a zero byte into a hole
	h1 := sparseHash(t, p)
	writeAt(t, p, []byte("Data"), 1<<20)
	h2 := sparseHash(t, p)
	if h0 == h1 || h1 == h2 || h0 == h2 {
		t.Errorf("hashes do not change: %x %x %x", h0[:4], h1[:4], h2[:4])
	}
}

// TestAssembleScanNoDegraded: with --scan, --no-degraded leaves a newly
// degraded array assembled but not started (exit 0, as mdadm 4.2, and no
// "No arrays found"), and holds nothing that stops the next assemble;
// --scan alone then starts it degraded (mdadm's start_partial_ok).
func TestAssembleScanNoDegraded(t *testing.T) {
	const size = 32 << 20
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	const uuid = "11112222:33334444:55556666:77778888"
	devs := mkArray(t, dir, "/dev/md/nd", 4, size, "-l5", "-n4", "--assume-clean", "--uuid="+uuid)
	conf := filepath.Join(dir, "mdadm.conf")
	text := "DEVICE " + strings.Join(devs[:3], " ") + "\nARRAY /dev/md/nd UUID=" + uuid + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	before := hashAll(t, devs)
	code, _, errs := mdtool(t, "assemble", "--foreground", "--run-dir", runDir, "--scan", "--no-degraded", "--config", conf)
	if code != 0 || errs != "mdtool: /dev/md/nd assembled from 3 drives (out of 4), but not started.\n" {
		t.Errorf("--no-degraded: exit %d:\n%s", code, errs)
	}
	for p, h := range hashAll(t, devs) {
		if before[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	env, _, errb := daemonEnv()
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"assemble", "--foreground", "--scan", "--config", conf, "--run-dir", runDir}, env)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errb.String(), "has been started") {
		select {
		case code := <-done:
			t.Fatalf("--scan: exit %d:\n%s", code, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("--scan did not start the array:\n%s", errb.String())
		}
	}
	if got := errb.String(); !strings.Contains(got, "mdtool: /dev/md/nd has been started with 3 drives (out of 4).\n") {
		t.Errorf("--scan:\n%s", got)
	}
	if code, _, errs := mdtool(t, "stop", "--run-dir", runDir, "/dev/md/nd"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, errs)
	}
	if code := <-done; code != 0 {
		t.Errorf("assemble --scan ended with %d", code)
	}
}
