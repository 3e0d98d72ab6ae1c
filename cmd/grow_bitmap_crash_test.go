package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/mdvm"
)

// growCrashPoints are the pause points of the engine's bitmap change
// (engine/growbitmap.go) and whether the superblocks name the bitmap
// after a crash there.
var growCrashPoints = map[string][]struct {
	point  string
	bitmap bool
}{
	"add":    {{"add-area", false}, {"add-loaded", false}, {"super-written", true}},
	"remove": {{"remove-dropped", true}, {"super-written", false}},
}

// examineAll runs mdtool examine on every member and says whether all,
// or none, name an internal bitmap (a mix fails the test).
func examineHasBitmap(t *testing.T, devs []string) bool {
	t.Helper()
	n := 0
	for _, d := range devs {
		code, out, errs := mdtool(t, "examine", d)
		if code != 0 {
			t.Fatalf("examine %s: exit %d: %s", d, code, errs)
		}
		if strings.Contains(out, "Internal Bitmap : ") {
			n++
		}
	}
	if n != 0 && n != len(devs) {
		t.Fatalf("%d of %d members name a bitmap", n, len(devs))
	}
	return n != 0
}

// TestGrowBitmapKill9: 20 rounds in all of grow --bitmap=internal or
// --bitmap=none on a running array under a write load (crashload: random
// writes and flushes), the daemon killed with SIGKILL at a point of the
// change chosen at random (the test build's pause hook stops it there:
// bitmap areas written, bitmap loaded, superblocks written; bitmap
// dropped, superblocks written). After each restart: the metadata is
// before or after the change as that point says (never a mix), the engine
// resyncs, every durable write reads back and check finds 0 mismatches.
// Some crashed member sets, and sets mixing members from before and after
// the superblock writes (a crash among them), go to the kernel: it
// assembles them, its check finds 0 mismatches and it reads back every
// durable write.
func TestGrowBitmapKill9(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	rng := crashRand(t, 2)
	type forKernel struct {
		name   string
		imgs   []string
		state  *crashload.State
		bitmap bool
	}
	var sets []forKernel
	levels := []struct {
		name   string
		n      int
		rounds int
		opts   []string
	}{
		{"raid5", 3, 12, []string{"-l5", "-n3", "-c64", "-e1.2"}},
		{"raid1", 2, 8, []string{"-l1", "-n2", "-e1.0"}},
	}
	for _, lv := range levels {
		ok := t.Run(lv.name, func(t *testing.T) {
			md := "/dev/md/k" + lv.name
			devs := mkArray(t, dir, md, lv.n, 12<<20, append(lv.opts, "--assume-clean")...)
			var st *crashload.State
			has := false
			for round := 0; round < lv.rounds; round++ {
				op := map[bool]string{false: "add", true: "remove"}[has]
				pts := growCrashPoints[op]
				pt := pts[rng.IntN(len(pts))]
				if round < 3 && op == "add" {
					pt = pts[round%len(pts)] // every add point early on
				}
				marker := filepath.Join(dir, fmt.Sprintf("%s-%d.paused", lv.name, round))
				d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_GROW_PAUSE="+pt.point, "MDTOOL_TEST_GROW_PAUSE_FILE="+marker)
				if st == nil {
					st = crashload.NewState(arraySize(t, runDir, d.name))
				}
				c, err := crashload.Dial(d.socket())
				if err != nil {
					t.Fatal(err)
				}
				cfg := crashload.Config{Seed: rng.Uint64(), ReadPercent: 10, FlushEvery: 10 * time.Millisecond}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				done := make(chan error, 1)
				go func() { done <- st.Run(ctx, c, cfg) }()
				arg := map[string]string{"add": "--bitmap=internal", "remove": "--bitmap=none"}[op]
				args := []string{"grow", "--run-dir", runDir, md, arg}
				if op == "add" {
					args = append(args, "--bitmap-chunk=256K")
				}
				growDone := growAsync(args)
				waitPaused(t, d, marker, pt.point, growDone)
				d.kill()
				<-growDone
				err = <-done
				cancel()
				c.Close()
				if err != nil {
					t.Fatalf("round %d: workload: %v", round, err)
				}
				has = examineHasBitmap(t, devs)
				if has != pt.bitmap {
					t.Fatalf("round %d: killed at %s of a %s: members name a bitmap: %v, want %v", round, pt.point, op, has, pt.bitmap)
				}
				if len(sets) < 3+map[bool]int{true: 1, false: 0}[lv.name == "raid1"] && rng.IntN(3) == 0 || round == lv.rounds-1 {
					var imgs []string
					for i, p := range devs {
						cp := filepath.Join(dir, fmt.Sprintf("k-%s-%d-%d.img", lv.name, round, i))
						copyFile(t, p, cp)
						imgs = append(imgs, cp)
					}
					sets = append(sets, forKernel{fmt.Sprintf("%s-r%d-%s-%s", lv.name, round, op, pt.point), imgs, st.Clone(), has})
				}
				d = startDaemon(t, runDir, md, devs)
				waitFor(t, runDir, md, "")
				crashVerify(t, d, st, round)
				if det := syncAction(t, runDir, md, "check"); det.Sync.Mismatches != 0 {
					t.Fatalf("round %d: check after the crash at %s found %d mismatches", round, pt.point, det.Sync.Mismatches)
				}
				t.Logf("round %d: %s killed at %s: bitmap %v, consistent", round, op, pt.point, has)
				d.stop()
			}
		})
		if !ok {
			return
		}
	}
	mixed := growMixedSets(t, dir)
	sets = append(sets, forKernel{"mixed-add", mixed[0], nil, true}, forKernel{"mixed-remove", mixed[1], nil, false})
	share := filepath.Join(dir, "share")
	os.MkdirAll(share, 0o755)
	var disks []mdvm.Disk
	var script strings.Builder
	for i, k := range sets {
		guest := cowDisks(&disks, k.imgs)
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&script, "mdadm --assemble %s %s || echo \"ASSEMBLY FAILED %s\"\n", md, strings.Join(guest, " "), k.name)
		fmt.Fprintf(&script, "mdadm --wait %s\n", md)
		fmt.Fprintf(&script, "echo \"BITMAP %s $(cat %s/bitmap/location)\"\n", k.name, sys)
		fmt.Fprintf(&script, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&script, "echo \"MISMATCH %s $(cat %s/mismatch_cnt) $(cat %s/last_sync_action)\"\n", k.name, sys, sys)
		if k.state != nil {
			fmt.Fprintf(&script, "dd if=%s of=/share/%s.bin bs=1M 2>/dev/null\n", md, k.name)
		}
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Share: share, Timeout: 900 * time.Second}))
	field := func(tag, name string) string {
		m := regexp.MustCompile(`(?m)^` + tag + ` ` + regexp.QuoteMeta(name) + ` (.*)$`).FindStringSubmatch(out)
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	for _, k := range sets {
		if strings.Contains(out, "ASSEMBLY FAILED "+k.name+"\n") {
			t.Errorf("%s: the kernel does not assemble it", k.name)
			continue
		}
		if loc := field("BITMAP", k.name); (loc != "none") != k.bitmap {
			t.Errorf("%s: kernel bitmap location %q, want a bitmap: %v", k.name, loc, k.bitmap)
		}
		if got := field("MISMATCH", k.name); got != "0 check" {
			t.Errorf("%s: kernel check: %q, want \"0 check\"", k.name, got)
		}
		if k.state == nil {
			continue
		}
		f, err := os.Open(filepath.Join(share, k.name+".bin"))
		if err != nil {
			t.Errorf("%s: %v", k.name, err)
			continue
		}
		r, err := k.state.VerifyImage(f)
		f.Close()
		if err != nil || !r.OK() {
			t.Errorf("%s: what the kernel reads: %v %s", k.name, err, r)
		}
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
}

// growAsync runs mdtool grow in the background; its exit status comes on
// the channel.
func growAsync(args []string) chan int {
	done := make(chan int, 1)
	go func() {
		env, _, _ := daemonEnv()
		done <- Main(args, env)
	}()
	return done
}

// waitPaused waits until the daemon says (in marker) that it stopped at
// point; it fails the test when the grow ends first or after a generous
// timeout.
func waitPaused(t *testing.T, d *daemonProc, marker, point string, growDone chan int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(marker); err == nil && string(b) == point {
			return
		}
		select {
		case code := <-growDone:
			t.Fatalf("grow ended (exit %d) before the pause point %s:\n%s", code, point, d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not reach %s:\n%s", point, d.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// growMixedSets makes two raid5 member sets of a crash in the middle of
// the superblock writes of a bitmap add and of a bitmap remove: member 0
// as after the writes, the others as before (the change was made while
// the array was written to, then the daemon was killed after it).
func growMixedSets(t *testing.T, dir string) [2][]string {
	t.Helper()
	runDir := filepath.Join(dir, "run-mixed")
	var out [2][]string
	for i, op := range []string{"internal", "none"} {
		md := fmt.Sprintf("/dev/md/mix%d", i)
		opts := []string{"-l5", "-n3", "-c64", "--assume-clean"}
		first := "add-loaded"
		if op == "none" {
			opts = append(opts, "--bitmap=internal", "--bitmap-chunk=256K")
			first = "remove-dropped"
		}
		devs := mkArray(t, dir, md, 3, 12<<20, opts...)
		marker := filepath.Join(dir, fmt.Sprintf("mix%d.paused", i))
		d := startDaemon(t, runDir, md, devs, "MDTOOL_TEST_GROW_PAUSE="+first+",super-written", "MDTOOL_TEST_GROW_PAUSE_FILE="+marker)
		fillRandom(t, d.socket(), 0, 1<<20, uint64(40+i))
		growDone := growAsync([]string{"grow", "--run-dir", runDir, md, "--bitmap=" + op})
		// Writes are held back while the daemon waits here: the members
		// are exactly as just before the superblock writes.
		waitPaused(t, d, marker, first, growDone)
		before := snapshotMembers(t, dir, fmt.Sprintf("mix%d-before", i), devs)
		if err := os.WriteFile(marker+".resume."+first, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitPaused(t, d, marker, "super-written", growDone)
		d.kill()
		<-growDone
		copyFile(t, devs[0], before[0])
		out[i] = before
	}
	return out
}
