package cmd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// daemonProc is `mdtool assemble --foreground` run as a child process of
// the test (the real binary), so that it can be killed with SIGKILL.
type daemonProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	runDir string
	md     string
	name   string
	exited chan struct{}
}

// startDaemon starts the daemon and waits until it serves.
func startDaemon(t *testing.T, runDir, md string, devs []string, env ...string) *daemonProc {
	t.Helper()
	bin := mdtoolBinary(t)
	d := &daemonProc{t: t, stderr: &lockedBuffer{}, runDir: runDir, md: md, exited: make(chan struct{})}
	d.name, _ = daemon.ArrayName(md)
	d.cmd = exec.Command(bin, append([]string{"assemble", "--foreground", "--run-dir", runDir, md}, devs...)...)
	d.cmd.Env = append(append(os.Environ(), "MDTOOL_CONFIG=/dev/null"), env...)
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.kill() })
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			t.Fatalf("assemble %s exited: %v\n%s", md, d.cmd.ProcessState, d.stderr.String())
		default:
		}
		if cl, err := daemon.Dial(runDir, d.name); err == nil {
			_, err := cl.Call(context.Background(), daemon.Request{Op: daemon.OpPing})
			cl.Close()
			if err == nil && strings.Contains(d.stderr.String(), " has been started with ") {
				return d
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("assemble %s did not become ready:\n%s", md, d.stderr.String())
	return nil
}

func (d *daemonProc) socket() string { return daemon.PathsFor(d.runDir, d.name).NBD() }

// kill kills the daemon with SIGKILL and reaps it.
func (d *daemonProc) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// stop stops the daemon with mdtool stop.
func (d *daemonProc) stop() {
	d.t.Helper()
	code, _, errs := mdtool(d.t, "stop", "--run-dir", d.runDir, d.md)
	if code != 0 {
		d.t.Fatalf("stop %s: exit %d: %s\n%s", d.md, code, errs, d.stderr.String())
	}
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		d.t.Fatalf("daemon of %s did not exit after stop", d.md)
	}
	if !d.cmd.ProcessState.Success() {
		d.t.Errorf("daemon of %s: %v\n%s", d.md, d.cmd.ProcessState, d.stderr.String())
	}
}

type crashLevel struct {
	name string
	n    int
	opts []string
}

func crashLevels() []crashLevel {
	bm := []string{"--bitmap=internal", "--bitmap-chunk=64K"}
	return []crashLevel{
		{"raid1", 2, append([]string{"-l1", "-n2"}, bm...)},
		{"raid4", 3, append([]string{"-l4", "-n3", "-c", "64"}, bm...)},
		{"raid5", 4, append([]string{"-l5", "-n4", "-c", "64"}, bm...)},
		{"raid6", 4, append([]string{"-l6", "-n4", "-c", "64"}, bm...)},
		{"raid10", 4, append([]string{"-l10", "-n4", "-c", "64"}, bm...)},
		{"raid1-nobitmap", 2, []string{"-l1", "-n2"}},
		{"raid5-nobitmap", 3, []string{"-l5", "-n3", "-c", "64"}},
	}
}

const crashRounds = 20

// crashVerify reads the whole array through NBD and checks it against the
// record; then it flushes and takes what it read as durable.
func crashVerify(t *testing.T, d *daemonProc, st *crashload.State, round int) {
	t.Helper()
	c, err := crashload.Dial(d.socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := st.Verify(c)
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	if !r.OK() {
		t.Fatalf("round %d: after the restart: %s", round, r)
	}
	if err := st.Settle(c, r); err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
}

// TestCrashKill9 kills the daemon with SIGKILL at a random moment of a
// workload of random writes and flushes (crashload), 20 times per
// redundant level (raid1/4/5/6/10 with a bitmap, raid1/5 without). After
// each restart the engine's resync completes (mdtool wait, detail --json),
// every write acknowledged before a completed flush reads back (or a later
// version of its block; never an older one, never a torn one), and a
// check (mdtool action check) finds 0 mismatches. The images of the last
// crash (writes to the first eighth of a clean array), which mdtool did
// not resync, go to the kernel (mdvm): it assembles them, resyncs only
// the chunks the bitmap marks dirty (a chunk mdtool wrote without setting
// its bit would show up as a mismatch), reads back what crashload
// requires, and its check reports mismatch_cnt 0.
func TestCrashKill9(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	rng := crashRand(t, 1)
	type crashed struct {
		lv    crashLevel
		imgs  []string
		state *crashload.State
	}
	var forKernel []crashed
	for _, lv := range crashLevels() {
		lv := lv
		ok := t.Run(lv.name, func(t *testing.T) {
			md := "/dev/md/c" + strings.ReplaceAll(lv.name, "-", "")
			devs := mkArray(t, dir, md, lv.n, 12<<20, append(lv.opts, "--assume-clean")...)
			var st *crashload.State
			var writes, flushes uint64
			wasDirty, dirtyKills := false, 0
			start := time.Now()
			for round := 0; round <= crashRounds; round++ {
				d := startDaemon(t, runDir, md, devs)
				if st == nil {
					st = crashload.NewState(arraySize(t, runDir, d.name))
				} else {
					// The engine resyncs the dirty array by itself; an
					// array that went clean before the kill (no write
					// for safe_mode_delay on a loaded machine) gets none,
					// as in md.
					want := ""
					if wasDirty {
						want = "resync"
					}
					waitFor(t, runDir, md, want)
					crashVerify(t, d, st, round)
					if det := syncAction(t, runDir, md, "check"); det.Sync.Mismatches != 0 {
						t.Fatalf("round %d: check after the resync found %d mismatches", round, det.Sync.Mismatches)
					}
				}
				if round == crashRounds {
					d.stop()
					break
				}
				cfg := crashload.Config{Seed: rng.Uint64(), ReadPercent: 10,
					FlushEvery: time.Duration(5+rng.IntN(20)) * time.Millisecond}
				if round == crashRounds-1 {
					// The crash the kernel gets: from a clean array (a
					// clean stop clears the bitmap), writes to the first
					// eighth only, so that only its chunks are dirty and
					// the kernel's bitmap-guided resync must suffice.
					// Safe mode off: the array stays dirty to the kill,
					// whatever the machine's load does to the writes.
					d.stop()
					d = startDaemon(t, runDir, md, devs, "MDTOOL_SAFE_MODE_DELAY=1h")
					cfg.Last = st.Blocks() / 8
				}
				wait := killMidWorkload(t, d, st, cfg, rng)
				wasDirty = readSB12(t, devs[0]).ResyncOffset != superblock.MaxSector
				if wasDirty {
					dirtyKills++
				}
				if err := wait(); err != nil {
					t.Fatalf("round %d: workload: %v", round, err)
				}
				if round == crashRounds-1 {
					// The crashed images, as mdtool left them, for the kernel.
					var imgs []string
					for i, p := range devs {
						cp := filepath.Join(dir, fmt.Sprintf("k-%s-%d.img", lv.name, i))
						copyFile(t, p, cp)
						imgs = append(imgs, cp)
					}
					forKernel = append(forKernel, crashed{lv, imgs, st.Clone()})
				}
			}
			writes, flushes = st.Acked, st.Flushes
			if dirtyKills == 0 {
				t.Errorf("the array was clean at all %d kills: the resync after a crash went untested", crashRounds)
			}
			if st.DurableBlocks() == 0 || flushes < crashRounds {
				t.Errorf("the workload made nothing durable: %d writes, %d flushes", writes, flushes)
			}
			t.Logf("%d rounds in %v: %d writes acknowledged, %d flushes, %d blocks durable, dirty at %d kills", crashRounds,
				time.Since(start).Round(time.Millisecond), writes, flushes, st.DurableBlocks(), dirtyKills)
		})
		if !ok {
			return
		}
	}

	// The kernel on the crashed images.
	share := filepath.Join(dir, "share")
	os.MkdirAll(share, 0o755)
	var disks []mdvm.Disk
	var script strings.Builder
	for i, k := range forKernel {
		var guest []string
		for _, p := range k.imgs {
			ex := hostExamine(t, p)
			if st := examineField(ex, "State"); st != "active" {
				t.Errorf("%s: crashed image %s: State %q, want active (killed mid-write)", k.lv.name, p, st)
			}
			guest = append(guest, "/dev/vd"+string(rune('a'+len(disks))))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&script, "echo \"DIRTY %s $(mdadm -X %s 2>/dev/null | sed -n 's/.*Bitmap : \\([0-9]*\\) bits (chunks), \\([0-9]*\\) dirty.*/\\2 of \\1/p')\"\n", k.lv.name, guest[0])
		fmt.Fprintf(&script, "mdadm --assemble %s %s || { echo \"ASSEMBLY FAILED %s\"; cat /proc/mdstat; }\n", md, strings.Join(guest, " "), k.lv.name)
		fmt.Fprintf(&script, "mdadm --wait %s; echo \"LAST %s $(cat %s/last_sync_action)\"\n", md, k.lv.name, sys)
		fmt.Fprintf(&script, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&script, "echo \"MISMATCH %s $(cat %s/mismatch_cnt) $(cat %s/last_sync_action)\"\n", k.lv.name, sys, sys)
		fmt.Fprintf(&script, "dd if=%s of=/share/%s.bin bs=1M 2>/dev/null; echo \"DUMPED %s $?\"\n", md, k.lv.name, k.lv.name)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
		fmt.Fprintf(&script, "echo \"AFTER %s $(mdadm -X %s 2>/dev/null | sed -n 's/.*chunks), \\([0-9]*\\) dirty.*/\\1/p')\"\n", k.lv.name, guest[0])
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Share: share, Timeout: 600 * time.Second}))
	field := func(tag, name string) string {
		m := regexp.MustCompile(`(?m)^` + tag + ` ` + regexp.QuoteMeta(name) + ` (.*)$`).FindStringSubmatch(out)
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	for _, k := range forKernel {
		bitmap := !strings.Contains(k.lv.name, "nobitmap")
		t.Logf("kernel on crashed %s: dirty chunks %s, after assembly %s, check %s, dirty at the end %s",
			k.lv.name, field("DIRTY", k.lv.name), field("LAST", k.lv.name), field("MISMATCH", k.lv.name), field("AFTER", k.lv.name))
		if bitmap {
			// Only chunks of the first eighth were written.
			var dirty, bits int
			if _, err := fmt.Sscanf(field("DIRTY", k.lv.name), "%d of %d", &dirty, &bits); err != nil || dirty == 0 || dirty > bits/8+1 {
				t.Errorf("%s: the crashed bitmap has %q dirty chunks, want some, at most an eighth (and one)", k.lv.name, field("DIRTY", k.lv.name))
			}
		}
		if got := field("LAST", k.lv.name); got != "resync" {
			t.Errorf("%s: the kernel's last sync action after assembly is %q, want resync", k.lv.name, got)
		}
		if got := field("MISMATCH", k.lv.name); got != "0 check" {
			t.Errorf("%s: kernel check after its resync: mismatch_cnt and action %q, want \"0 check\"", k.lv.name, got)
		}
		if bitmap && field("AFTER", k.lv.name) != "0" {
			t.Errorf("%s: %s dirty bitmap chunks after the kernel stopped the array", k.lv.name, field("AFTER", k.lv.name))
		}
		f, err := os.Open(filepath.Join(share, k.lv.name+".bin"))
		if err != nil {
			t.Errorf("%s: %v\n%s", k.lv.name, err, out)
			continue
		}
		r, err := k.state.VerifyImage(f)
		f.Close()
		if err != nil || !r.OK() {
			t.Errorf("%s: what the kernel reads from the crashed array: %v %s", k.lv.name, err, r)
		}
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
}

// killMidWorkload runs crashload's workload cfg against the daemon d and
// kills it with SIGKILL once a write was acknowledged and 100-500 ms more
// passed (only then is the array dirty: on a loaded machine the sleep
// alone may end before the first write). wait returns the workload's
// error once it has noticed the kill.
func killMidWorkload(t *testing.T, d *daemonProc, st *crashload.State, cfg crashload.Config, rng *rand.Rand) (wait func() error) {
	t.Helper()
	c, err := crashload.Dial(d.socket())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan error, 1)
	base := st.AckedWrites()
	go func() { done <- st.Run(ctx, c, cfg) }()
	for deadline := time.Now().Add(20 * time.Second); st.AckedWrites() == base && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
	d.kill()
	return func() error {
		err := <-done
		cancel()
		c.Close()
		return err
	}
}

// crashRand is a crash test's random source: seeded from the clock, or
// from MDTOOL_CRASH_SEED to repeat a run's choices (logged); stream keeps
// tests that share a seed apart.
func crashRand(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MDTOOL_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (MDTOOL_CRASH_SEED repeats a run's choices)", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// cowDisks adds imgs to a VM run's disks, copy-on-write (the images stay
// as they are), and returns their guest names (/dev/vdX in order).
func cowDisks(disks *[]mdvm.Disk, imgs []string) []string {
	var guest []string
	for _, p := range imgs {
		guest = append(guest, "/dev/vd"+string(rune('a'+len(*disks))))
		*disks = append(*disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
	}
	return guest
}
