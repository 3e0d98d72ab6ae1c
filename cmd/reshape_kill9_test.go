package cmd

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
	fiobench "mdtool/internal/nbdbench"
	"mdtool/superblock"
)

// reshapeKillRounds is the number of kills at random points of each
// reshape; the first checkpoint and the final superblock round come on
// top.
const reshapeKillRounds = 20

// reshapeKillPoints are a reshape's kill points in order: the first
// checkpoint, reshapeKillRounds fractions of the new array drawn at
// random, one in each twentieth of [0, 0.95), and the finish.
func reshapeKillPoints(rng *rand.Rand) []string {
	pts := []string{"checkpoint"}
	for i := 0; i < reshapeKillRounds; i++ {
		f := (float64(i) + rng.Float64()) / reshapeKillRounds * 0.95
		pts = append(pts, "move:"+strconv.FormatFloat(f, 'f', 4, 64))
	}
	return append(pts, "finish")
}

var (
	reReshapePause  = regexp.MustCompile(`RESHAPE-PAUSE (\S+) (\d+) (\d+)`)
	reReshapeResume = regexp.MustCompile(`RESHAPE-RESUME (\d+) (\d+)`)
)

// reshapeRecord reads reshape_position and the reshape bit from a
// member's superblock.
func reshapeRecord(t *testing.T, dev string) (active bool, pos uint64, raidDisks uint32) {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	fd, err := superblock.FindV1(f, uint64(fi.Size())>>9, -1)
	if err != nil {
		t.Fatalf("%s: %v", dev, err)
	}
	sb := fd.SB
	return sb.FeatureMap&superblock.FeatureReshapeActive != 0, sb.ReshapePosition, sb.RaidDisks
}

// fioRound runs one fio round through NBD: job writes 4 KiB blocks at
// random over the array (fixed seed) and verifies them (verifyOnly:
// reads back and verifies what the same job wrote in an earlier run,
// fio's --verify_only). Any fio error or verify complaint fails the test.
func fioRound(t *testing.T, uri string, j fiobench.Job, verifyOnly bool) {
	t.Helper()
	if verifyOnly {
		j.Extra = append(slices.Clone(j.Extra), "--verify_only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, out, err := fiobench.Run(ctx, uri, j)
	var want int64 = 2 << 20
	switch {
	case err != nil:
		t.Fatalf("fio %s (verify only %v): %v\n%s", j.Name, verifyOnly, err, out)
	case res.Errors != 0 || strings.Contains(out, "verify:") || strings.Contains(out, "bad magic"):
		t.Fatalf("fio %s (verify only %v) reports errors:\n%s", j.Name, verifyOnly, out)
	case res.ReadBytes != want || (!verifyOnly && res.WriteBytes != want):
		t.Fatalf("fio %s (verify only %v): wrote %d, verified %d bytes, want %d", j.Name, verifyOnly, res.WriteBytes, res.ReadBytes, want)
	}
}

// waitReshapePause waits until the daemon says it stopped at its pause
// point and returns the point, the position and the recorded position.
func waitReshapePause(t *testing.T, d *daemonProc) (string, uint64, uint64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if m := reReshapePause.FindStringSubmatch(d.stderr.String()); m != nil {
			p, _ := strconv.ParseUint(m[2], 10, 64)
			r, _ := strconv.ParseUint(m[3], 10, 64)
			return m[1], p, r
		}
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited before its pause point:\n%s", d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not reach its pause point:\n%s", d.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reshapeFinished waits until the reshape is done (detail --json has no
// "reshape" object, the array has its new number of devices) and no sync
// action runs (a killed array is resynced after its reshape).
func reshapeFinished(t *testing.T, runDir, md string) {
	t.Helper()
	mdtool(t, "wait", md, "--run-dir", runDir)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d := detailJSONOf(t, runDir, md)
		sy, _ := d["sync"].(map[string]any)
		if _, reshaping := d["reshape"]; !reshaping && sy["action"] == "idle" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the reshape did not finish: %v", md, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reshapeFinal is a finished member set for the kernel.
type reshapeFinal struct {
	name  string
	imgs  []string
	md5   string
	bytes int64
	disks int  // raid_disks (imgs: the members, spares after them)
	raid0 bool // no check (raid0 has no mismatch_cnt)
}

// TestReshapeKill9 is issue #14's first acceptance item: grow a raid5
// 4->5 and a raid6 5->6 (mdtool grow --raid-devices, no backup file)
// with fio verify running through NBD, and kill -9 the daemon 22 times
// during each reshape: once before its very first checkpoint is written
// (the superblocks still record position 0, data already moved), at 20
// random points (seeded, logged: a fraction of the new array drawn in
// each twentieth; the test build's pause hook holds the reshape before
// the first window at or past it while user I/O goes on) and once before
// the superblocks of the finished reshape are written (all data moved,
// the last checkpoint recorded).
//
// fio cannot outlive its NBD connection, so each round runs its fio job
// to completion between restart and kill: a write+verify job (2 MiB of
// random 4 KiB blocks over the whole array, crc32c, its own seed). In
// the random rounds it runs while the reshape moves data; in the first
// and last rounds the reshape is held at its start (the test build's
// gate) until fio is done, so that fio does not block on the metadata
// the pause holds. The whole array is read after fio's round and again
// after the restart: the md5s must be equal (every byte, not only
// fio's, survives the kill and the resumed reshape). After the first
// kill, one in the middle and the last, fio also re-verifies the
// previous round's blocks (--verify_only, same seed) before writing
// anew.
//
// After each kill the superblocks record the reshape, their position
// never goes back, and the restarted daemon resumes exactly at the
// recorded position. After the last restart the reshape finishes, the
// array has the new size on a new NBD connection, check finds 0
// mismatches and the members record n+1 devices without a reshape.
// Then one VM boot: the kernel assembles both final member sets, its
// check gives mismatch_cnt 0 and the md5 of its data equals mdtool's.
func TestReshapeKill9(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	if _, err := exec.LookPath("fio"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("fio is required in CI")
		}
		t.Skip("fio not installed")
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	rng := crashRand(t, 14)
	var finals []reshapeFinal
	levels := []struct {
		name string
		n    int
		opts []string
	}{
		{"raid5", 4, []string{"-l5", "-n4", "-c64"}},
		{"raid6", 5, []string{"-l6", "-n5", "-c64"}},
	}
	for _, lv := range levels {
		ok := t.Run(lv.name, func(t *testing.T) {
			start := time.Now()
			md := "/dev/md/rk" + lv.name
			devs := mkArray(t, dir, md, lv.n, 12<<20, append(lv.opts, "--assume-clean")...)
			spare := sparse(t, dir, "rk"+lv.name+"-spare.img", 12<<20)
			points := reshapeKillPoints(rng)
			t.Logf("kill points: %v", points)
			var sum string
			var oldSize int64
			var prev *fiobench.Job
			var recorded uint64
			for round, pt := range points {
				t0 := time.Now()
				gate := filepath.Join(dir, fmt.Sprintf("%s-%d.gate", lv.name, round))
				env := []string{"MDTOOL_TEST_RESHAPE_PAUSE=" + pt}
				gated := pt == "checkpoint" || pt == "finish"
				if gated {
					env = append(env, "MDTOOL_TEST_RESHAPE_GATE="+gate)
				}
				members := append(slices.Clone(devs), spare)
				if round == 0 {
					members = devs
				}
				d := startDaemon(t, runDir, md, members, env...)
				uri := "nbd+unix:///?socket=" + d.socket()
				t1 := time.Now()
				if round == 0 {
					oldSize = arraySize(t, runDir, d.name)
					if code, _, errs := mdtool(t, md, "--add", spare, "--run-dir", runDir); code != 0 {
						t.Fatalf("--add: exit %d %s", code, errs)
					}
					sum = md5hex(fillRandom(t, d.socket(), 0, oldSize, rng.Uint64()))
					if code, _, errs := mdtool(t, "--grow", md, fmt.Sprintf("--raid-devices=%d", lv.n+1), "--run-dir", runDir); code != 0 {
						t.Fatalf("grow: exit %d %s", code, errs)
					}
				} else {
					if got := md5hex(readArray(t, d.socket(), oldSize)); got != sum {
						t.Fatalf("round %d: after the restart the array reads md5 %s, before the kill %s", round, got, sum)
					}
					if round == 1 || round == reshapeKillRounds/2+1 {
						fioRound(t, uri, *prev, true)
					}
				}
				j := fiobench.Job{Name: fmt.Sprintf("%s-r%d", lv.name, round), RW: "randwrite", BS: "4k", IODepth: 16,
					Size: oldSize, Extra: []string{"--io_size=2m", fmt.Sprintf("--randseed=%d", rng.Uint32()),
						"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}}
				t2 := time.Now()
				fioRound(t, uri, j, false)
				prev = &j
				t3 := time.Now()
				sum = md5hex(readArray(t, d.socket(), oldSize))
				if gated {
					if err := os.WriteFile(gate, nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				point, pos, rec := waitReshapePause(t, d)
				t4 := time.Now()
				d.kill()
				if m := reReshapeResume.FindStringSubmatch(d.stderr.String()); round > 0 && (m == nil || m[1] != strconv.FormatUint(recorded, 10)) {
					t.Fatalf("round %d: the reshape did not resume at the recorded position %d: %q\n%s", round, recorded, m, d.stderr.String())
				}
				active, now, disks := reshapeRecord(t, devs[0])
				// The superblocks hold at least what the reshape last recorded (a
				// user write into moved but unrecorded stripes records more,
				// md's reshape_safe) and never more than has moved.
				if !active || disks != uint32(lv.n+1) || now < recorded || now < rec || now > pos {
					t.Fatalf("round %d: killed at %s (position %d, recorded %d): superblock reshape %v at %d, raid_disks %d; before %d",
						round, point, pos, rec, active, now, disks, recorded)
				}
				if pt == "checkpoint" && now != 0 {
					t.Fatalf("round %d: killed before the first checkpoint, the superblocks record %d", round, now)
				}
				recorded = now
				t.Logf("round %d: killed at %s %d, reshape_position %d (start %v, verify %v, fio %v, pause %v)", round, point, pos, now,
					t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), t4.Sub(t3).Round(time.Millisecond))
			}
			// The last restart: the reshape finishes.
			d := startDaemon(t, runDir, md, append(slices.Clone(devs), spare))
			uri := "nbd+unix:///?socket=" + d.socket()
			if got := md5hex(readArray(t, d.socket(), oldSize)); got != sum {
				t.Fatalf("after the last restart the array reads md5 %s, before the kill %s", got, sum)
			}
			fioRound(t, uri, *prev, true)
			reshapeFinished(t, runDir, md)
			if det := syncAction(t, runDir, md, "check"); det.Sync.Mismatches != 0 {
				t.Fatalf("check after the reshape found %d mismatches", det.Sync.Mismatches)
			}
			size := arraySize(t, runDir, d.name)
			if want := oldSize / int64(lv.n-map[string]int{"raid5": 1, "raid6": 2}[lv.name]) * int64(lv.n+1-map[string]int{"raid5": 1, "raid6": 2}[lv.name]); size != want {
				t.Errorf("array size after the reshape %d, want %d", size, want)
			}
			data := readArray(t, d.socket(), size)
			if got := md5hex(data[:oldSize]); got != sum {
				t.Fatalf("after the reshape the old array's bytes read md5 %s, want %s", got, sum)
			}
			if !bytes.Equal(data[oldSize:], make([]byte, size-oldSize)) {
				t.Errorf("the space the reshape added is not zero")
			}
			fioRound(t, uri, *prev, true)
			d.stop()
			for _, p := range append(slices.Clone(devs), spare) {
				if active, _, disks := reshapeRecord(t, p); active || disks != uint32(lv.n+1) {
					t.Errorf("%s after the reshape: reshape active %v, raid_disks %d", p, active, disks)
				}
			}
			finals = append(finals, reshapeFinal{name: lv.name, imgs: append(slices.Clone(devs), spare), md5: md5hex(data), bytes: size, disks: lv.n + 1})
			t.Logf("%d kills in %v", len(points), time.Since(start).Round(time.Millisecond))
		})
		if !ok {
			return
		}
	}
	finals = append(finals, reshapeKillLevels(t, dir, runDir, rng)...)
	reshapeKernelFinal(t, finals)
}

// reshapeKernelFinal has the kernel assemble each finished member set in
// one VM boot: size, check and md5 as mdtool served them. The members are
// packed into one image (reshapeKernelPack), one loop device each.
func reshapeKernelFinal(t *testing.T, finals []reshapeFinal) {
	t.Helper()
	disk, loops := reshapeKernelPack(t, finals)
	var script strings.Builder
	script.WriteString("LO=/usr/bin/losetup\n") // mdvm copies Bins to /usr/bin
	for i, k := range finals {
		var guest []string
		for j := range k.imgs {
			guest = append(guest, "$L"+strconv.Itoa(j))
			fmt.Fprintf(&script, "L%d=$($LO --offset %d --sizelimit %d --show -f /dev/vda)\n", j, loops[i][j][0], loops[i][j][1])
		}
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&script, "mdadm --assemble %s %s || echo \"ASSEMBLY FAILED %s\"\n", md, strings.Join(guest, " "), k.name)
		fmt.Fprintf(&script, "echo \"SIZE %s $(cat /sys/block/md%d/size) $(cat %s/raid_disks) $(cat %s/reshape_position 2>/dev/null || echo none)\"\n", k.name, i, sys, sys)
		fmt.Fprintf(&script, "if [ -e %[1]s/mismatch_cnt ]; then echo check > %[1]s/sync_action; sleep 0.2; mdadm --wait %[2]s; echo \"MISMATCH %[3]s $(cat %[1]s/mismatch_cnt) $(cat %[1]s/last_sync_action)\"; else echo \"MISMATCH %[3]s none\"; fi\n", sys, md, k.name)
		fmt.Fprintf(&script, "echo \"MD5 %s $(md5sum < %s | cut -d' ' -f1)\"\n", k.name, md)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	disks := []mdvm.Disk{{Path: disk, Mode: mdvm.COW}}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Bins: []string{"/usr/sbin/losetup"}, Script: script.String(), Timeout: 900 * time.Second}))
	field := func(tag, name string) string {
		m := regexp.MustCompile(`(?m)^` + tag + ` ` + regexp.QuoteMeta(name) + ` (.*)$`).FindStringSubmatch(out)
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	for _, k := range finals {
		if strings.Contains(out, "ASSEMBLY FAILED "+k.name+"\n") {
			t.Errorf("%s: the kernel does not assemble the finished members", k.name)
			continue
		}
		if got, want := field("SIZE", k.name), fmt.Sprintf("%d %d none", k.bytes>>9, k.disks); got != want {
			t.Errorf("%s: kernel size, raid_disks, reshape_position %q, want %q", k.name, got, want)
		}
		if want := map[bool]string{false: "0 check", true: "none"}[k.raid0]; field("MISMATCH", k.name) != want {
			t.Errorf("%s: kernel check: %q, want %q", k.name, field("MISMATCH", k.name), want)
		}
		if got := field("MD5", k.name); got != k.md5 {
			t.Errorf("%s: the kernel reads md5 %s, mdtool served %s", k.name, got, k.md5)
		}
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
}
