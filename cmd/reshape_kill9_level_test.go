package cmd

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"mdtool/internal/daemon"
	fiobench "mdtool/internal/nbdbench"
	"mdtool/superblock"
)

// levelKillStep is one restriping level change of reshapeKillLevels:
// the --grow arguments (the spares it adds are new images), the level
// and raid_disks the reshape runs at, and the --grow run after the last
// restart when the reshape ended at a level other than the one asked for
// (mdadm 4.2's forked child imposes it; a restarted array stays at the
// level the reshape ran at, see internal/daemon/manage_reshape.go).
type levelKillStep struct {
	name   string
	grow   []string
	spares int
	runAt  int // raid_disks while the reshape runs
	after  []string
	level  int // the level the step ends at
	disks  int // raid_disks at the end
	// force: the reshape runs degraded (the role the new level adds is
	// filled by the reshape), so a restart after a kill during user
	// writes finds the array dirty and degraded, which mdadm 4.2 (and
	// md) start only with --force ("consider --force").
	force bool
	// takeover: no data moves (md's takeover), so no kill points: fio
	// writes before the change and verifies after it.
	takeover bool
}

// levelKillChains: raid0 -> raid5 -> raid6 -> raid5 -> raid0 on one
// array; raid1 -> raid5 (2 devices: md's takeover, nothing moves, no kill
// point); and raid1 -> raid5 grown to 3 devices in the same command
// (mdadm's --level=5 --raid-devices=3: the takeover, then a reshape).
var levelKillChains = []struct {
	name   string
	create []string
	n      int
	steps  []levelKillStep
}{
	{"r0", []string{"-l0", "-n3", "-c64"}, 3, []levelKillStep{
		{name: "raid0-raid5", grow: []string{"--level=5"}, spares: 1, runAt: 4, level: 5, disks: 4, force: true},
		{name: "raid5-raid6", grow: []string{"--level=6", "--raid-devices=5"}, spares: 1, runAt: 5, level: 6, disks: 5, force: true},
		{name: "raid6-raid5", grow: []string{"--level=5"}, runAt: 5, after: []string{"--level=5"}, level: 5, disks: 4},
		{name: "raid5-raid0", grow: []string{"--level=0"}, runAt: 4, after: []string{"--level=0"}, level: 0, disks: 3},
	}},
	{"r1t", []string{"-l1", "-n2", "--assume-clean"}, 2, []levelKillStep{
		{name: "raid1-raid5-takeover", grow: []string{"--level=5"}, level: 5, disks: 2, takeover: true},
	}},
	{"r1", []string{"-l1", "-n2", "--assume-clean"}, 2, []levelKillStep{
		{name: "raid1-raid5", grow: []string{"--level=5", "--raid-devices=3"}, spares: 1, runAt: 3, level: 5, disks: 3},
	}},
}

// levelKillPoints: the first checkpoint, one fraction drawn at random in
// the middle of the reshape, and the finish.
func levelKillPoints(rng *rand.Rand) []string {
	return []string{"checkpoint", "move:" + strconv.FormatFloat(0.2+0.6*rng.Float64(), 'f', 4, 64), "finish"}
}

// reshapeKillLevels is issue #14's level changes under kill -9 and fio
// (TestReshapeKill9's rounds, a few kill points each): every restriping
// level change mdadm 4.2 makes (raid0 -> raid5, raid5 -> raid6 and back,
// raid5 -> raid0) and raid1 -> raid5. Each round writes and verifies with
// fio through NBD while the reshape runs, the daemon is killed at the
// round's point, the superblocks record the reshape at the level it runs
// at without going back, the restarted daemon resumes at the recorded
// position, and the array reads the same md5 as before the kill. After
// the last restart the reshape finishes, the final level is imposed where
// mdadm's child would have, check finds 0 mismatches, the earlier fio
// blocks verify and the members record the new level. Each final member
// set (copied) is returned for the kernel.
func reshapeKillLevels(t *testing.T, dir, runDir string, rng *rand.Rand) []reshapeFinal {
	var finals []reshapeFinal
	for _, ch := range levelKillChains {
		md := "/dev/md/lk" + ch.name
		devs := mkArray(t, dir, md, ch.n, 12<<20, ch.create...)
		var sum string
		var prev *fiobench.Job
		for si, st := range ch.steps {
			ok := t.Run(st.name, func(t *testing.T) {
				start := time.Now()
				var spares []string
				for i := 0; i < st.spares; i++ {
					spares = append(spares, sparse(t, dir, fmt.Sprintf("lk%s-s%d-%d.img", ch.name, si, i), 12<<20))
				}
				var points []string
				if !st.takeover {
					points = levelKillPoints(rng)
				}
				t.Logf("kill points: %v", points)
				var oldSize int64
				var recorded uint64
				for round, pt := range points {
					gate := filepath.Join(dir, fmt.Sprintf("lk%s-%d-%d.gate", ch.name, si, round))
					env := []string{"MDTOOL_TEST_RESHAPE_PAUSE=" + pt}
					gated := pt == "checkpoint" || pt == "finish"
					if gated {
						env = append(env, "MDTOOL_TEST_RESHAPE_GATE="+gate)
					}
					args := devs
					if st.force && round > 0 {
						args = append([]string{"--force"}, devs...)
					}
					d := startDaemon(t, runDir, md, args, env...)
					uri := "nbd+unix:///?socket=" + d.socket()
					if round == 0 {
						oldSize = arraySize(t, runDir, d.name)
						if si == 0 {
							sum = md5hex(fillRandom(t, d.socket(), 0, oldSize, rng.Uint64()))
						} else if got := md5hex(readArray(t, d.socket(), oldSize)); got != sum {
							t.Fatalf("before the change the array reads md5 %s, after the last step %s", got, sum)
						}
						args := append(append([]string{"--grow", md}, st.grow...), "--run-dir", runDir)
						if len(spares) > 0 {
							args = append(append(args, "--add"), spares...)
						}
						if code, _, errs := mdtool(t, args...); code != 0 {
							t.Fatalf("%v: exit %d %s", args, code, errs)
						}
						devs = append(devs, spares...)
					} else if got := md5hex(readArray(t, d.socket(), oldSize)); got != sum {
						t.Fatalf("round %d: after the restart the array reads md5 %s, before the kill %s", round, got, sum)
					}
					if prev != nil {
						fioRound(t, uri, *prev, true)
					}
					j := levelFioJob(fmt.Sprintf("%s-r%d", st.name, round), oldSize, rng)
					fioRound(t, uri, j, false)
					prev = &j
					sum = md5hex(readArray(t, d.socket(), oldSize))
					if gated {
						if err := os.WriteFile(gate, nil, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					point, pos, rec := waitReshapePause(t, d)
					d.kill()
					if m := reReshapeResume.FindStringSubmatch(d.stderr.String()); round > 0 && (m == nil || m[1] != strconv.FormatUint(recorded, 10)) {
						t.Fatalf("round %d: the reshape did not resume at the recorded position %d: %q\n%s", round, recorded, m, d.stderr.String())
					}
					active, now, disks := reshapeRecord(t, devs[0])
					// As in TestReshapeKill9: the superblocks hold at least
					// what the reshape last recorded and never more than
					// has moved; a backwards reshape counts down from the
					// end of the array.
					back, begin := reshapeBackwards(t, devs[0]), uint64(0)
					if back {
						begin = uint64(oldSize >> 9)
					}
					if round == 0 {
						recorded = begin
					}
					if point == "finish" && back {
						pos = 0 // the hook gives the array's end at the finish: all moved
					}
					ahead := func(a, b uint64) bool { return a > b && !back || a < b && back } // a beyond b in the reshape's direction
					if !active || disks != uint32(st.runAt) || ahead(recorded, now) || ahead(rec, now) || ahead(now, pos) {
						t.Fatalf("round %d: killed at %s (position %d, recorded %d, backwards %v): superblock reshape %v at %d, raid_disks %d; before %d",
							round, point, pos, rec, back, active, now, disks, recorded)
					}
					if pt == "checkpoint" && now != begin {
						t.Fatalf("round %d: killed before the first checkpoint, the superblocks record %d, not the start %d", round, now, begin)
					}
					recorded = now
					t.Logf("round %d: killed at %s %d, reshape_position %d", round, point, pos, now)
				}
				args := devs
				if st.force {
					args = append([]string{"--force"}, devs...)
				}
				d := startDaemon(t, runDir, md, args)
				uri := "nbd+unix:///?socket=" + d.socket()
				if st.takeover {
					oldSize = arraySize(t, runDir, d.name)
					if si == 0 {
						sum = md5hex(fillRandom(t, d.socket(), 0, oldSize, rng.Uint64()))
					}
					j := levelFioJob(st.name, oldSize, rng)
					fioRound(t, uri, j, false)
					prev = &j
					sum = md5hex(readArray(t, d.socket(), oldSize))
					args := append(append([]string{"--grow", md}, st.grow...), "--run-dir", runDir)
					if code, _, errs := mdtool(t, args...); code != 0 {
						t.Fatalf("%v: exit %d %s", args, code, errs)
					}
				}
				if got := md5hex(readArray(t, d.socket(), oldSize)); got != sum {
					t.Fatalf("after the last restart the array reads md5 %s, before the kill %s", got, sum)
				}
				fioRound(t, uri, *prev, true)
				reshapeFinished(t, runDir, md)
				if st.after != nil {
					args := append(append([]string{"--grow", md}, st.after...), "--run-dir", runDir)
					if code, _, errs := mdtool(t, args...); code != 0 {
						t.Fatalf("%v after the reshape: exit %d %s", args, code, errs)
					}
					reshapeFinished(t, runDir, md)
				}
				status, err := queryStatus(runDir, d.name)
				if err != nil {
					t.Fatal(err)
				}
				if status.Level != st.level || status.RaidDisks != st.disks {
					t.Fatalf("after the change: level %d, raid_disks %d; want %d, %d", status.Level, status.RaidDisks, st.level, st.disks)
				}
				if st.level != superblock.LevelRAID0 {
					if det := syncAction(t, runDir, md, "check"); det.Sync.Mismatches != 0 {
						t.Fatalf("check after the change found %d mismatches", det.Sync.Mismatches)
					}
				}
				size := arraySize(t, runDir, d.name)
				data := readArray(t, d.socket(), size)
				if got := md5hex(data[:oldSize]); got != sum {
					t.Fatalf("after the change the old array's bytes read md5 %s, want %s", got, sum)
				}
				for _, b := range data[oldSize:] {
					if b != 0 {
						t.Fatalf("the space the reshape added is not zero")
					}
				}
				fioRound(t, uri, *prev, true)
				devs = levelMembers(t, status)
				d.stop()
				for _, p := range devs {
					if active, _, disks := reshapeRecord(t, p); active || disks != uint32(st.disks) {
						t.Errorf("%s after the change: reshape active %v, raid_disks %d", p, active, disks)
					}
				}
				finals = append(finals, reshapeFinal{name: ch.name + "-" + st.name, imgs: copyImages(t, dir, st.name, devs), md5: md5hex(data),
					bytes: size, disks: st.disks, raid0: st.level == superblock.LevelRAID0})
				t.Logf("%d kills in %v", len(points), time.Since(start).Round(time.Millisecond))
			})
			if !ok {
				t.FailNow()
			}
		}
	}
	return finals
}

// levelFioJob is a write+verify round of fio (TestReshapeKill9's job): 2
// MiB of random 4 KiB blocks over the array, crc32c, its own seed.
func levelFioJob(name string, size int64, rng *rand.Rand) fiobench.Job {
	return fiobench.Job{Name: name, RW: "randwrite", BS: "4k", IODepth: 16,
		Size: size, Extra: []string{"--io_size=2m", fmt.Sprintf("--randseed=%d", rng.Uint32()),
			"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}}
}

// reshapeBackwards reads the reshape-backwards bit of a member's superblock.
func reshapeBackwards(t *testing.T, dev string) bool {
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
	return fd.SB.FeatureMap&superblock.FeatureReshapeBackwards != 0
}

// levelMembers are the members the array holds (active and spares; a
// member a level change failed and removed is no longer one), in the
// order of their roles, spares last.
func levelMembers(t *testing.T, st *daemon.Status) []string {
	t.Helper()
	var active, spare []string
	byRole := map[int]string{}
	for _, m := range st.Members {
		switch m.State {
		case "in_sync":
			byRole[m.Role] = m.Path
		case "spare":
			spare = append(spare, m.Path)
		}
	}
	for r := 0; r < st.RaidDisks; r++ {
		p, ok := byRole[r]
		if !ok {
			t.Fatalf("after the change role %d has no member: %+v", r, st.Members)
		}
		active = append(active, p)
	}
	return append(active, spare...)
}

// copyImages copies the members (the kernel gets this step's result;
// the next step goes on with the originals).
func copyImages(t *testing.T, dir, tag string, imgs []string) []string {
	t.Helper()
	var out []string
	for i, p := range imgs {
		q := filepath.Join(dir, fmt.Sprintf("final-%s-%d.img", tag, i))
		src, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(q)
		if err == nil {
			_, err = io.Copy(dst, src)
		}
		src.Close()
		if err == nil {
			err = dst.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, q)
	}
	return slices.Clip(out)
}

// reshapeKernelPack packs the final member sets into one image (each
// member at a MiB boundary, zero blocks left as holes), so that the
// guest needs one disk however many members: loops[i][j] is member j of
// set i as offset and size.
func reshapeKernelPack(t *testing.T, finals []reshapeFinal) (string, [][][2]int64) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "members-*.img")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	loops := make([][][2]int64, len(finals))
	off := int64(1 << 20)
	buf := make([]byte, 1<<20)
	zero := make([]byte, 1<<20)
	for i, k := range finals {
		for _, p := range k.imgs {
			src, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for {
				m, err := io.ReadFull(src, buf)
				if m > 0 && !bytes.Equal(buf[:m], zero[:m]) {
					if _, werr := f.WriteAt(buf[:m], off+n); werr != nil {
						t.Fatal(werr)
					}
				}
				n += int64(m)
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			src.Close()
			loops[i] = append(loops[i], [2]int64{off, n})
			off += (n + 1<<20 - 1) &^ (1<<20 - 1)
		}
	}
	if err := f.Truncate(off); err != nil {
		t.Fatal(err)
	}
	return f.Name(), loops
}
