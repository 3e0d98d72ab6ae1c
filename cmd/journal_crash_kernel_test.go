package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/mdvm"
	"mdtool/superblock"
)

// TestCrashKill9Journal kills the daemon of a raid5 and a raid6 with a
// write journal (--write-journal) with SIGKILL in the middle of a
// workload of random writes and flushes, 8 times each, and of a raid5
// whose journal runs in write-back mode (action --journal-mode, md's
// journal_mode): there the log holds data the members never got, which
// every restart must write out. A journaled array
// records resync_offset MaxSector while it is active (md's
// MD_JOURNAL_CLEAN) and is never resynced: after each restart the
// engine replays what the log holds, every write acknowledged before a
// completed flush reads back (crashload's rules), and a check finds no
// mismatch without any resync (a stripe torn by the kill and not
// replayed would show up there). The images of the last kill go to the
// kernel: md replays mdtool's log itself (its log line "recovering ...
// data-parity stripes" says what it found), starts without a resync,
// reads back what crashload requires, and its check reports mismatch_cnt
// 0.
func TestCrashKill9Journal(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	rng := crashRand(t, 2)
	const rounds = 8
	type crashed struct {
		name  string
		imgs  []string
		state *crashload.State
	}
	var forKernel []crashed
	for _, c := range []struct {
		lv        crashLevel
		writeBack bool
	}{
		{crashLevel{"raid5", 4, []string{"-l5", "-n4", "-c", "64"}}, false},
		{crashLevel{"raid6", 4, []string{"-l6", "-n4", "-c", "64"}}, false},
		{crashLevel{"raid5wb", 4, []string{"-l5", "-n4", "-c", "64"}}, true},
	} {
		lv := c.lv
		ok := t.Run(lv.name, func(t *testing.T) {
			md := "/dev/md/j" + lv.name
			jdev := sparse(t, dir, "j"+lv.name+"-journal.img", 8<<20)
			devs := mkArray(t, dir, md, lv.n, 12<<20, append(lv.opts, "--assume-clean", "--write-journal", jdev)...)
			devs = append(devs, jdev)
			var st *crashload.State
			replays, dataOnly := 0, 0
			for round := 0; round <= rounds; round++ {
				d := startDaemon(t, runDir, md, devs)
				if st == nil {
					st = crashload.NewState(arraySize(t, runDir, d.name))
				} else {
					if strings.Contains(d.stderr.String(), "data-parity stripes") {
						replays++
					}
					if m := regexp.MustCompile(`recovering (\d+) data-only`).FindStringSubmatch(d.stderr.String()); m != nil && m[1] != "0" {
						dataOnly++
					}
					det := waitFor(t, runDir, md, "")
					if det.Sync.LastAction == "resync" {
						t.Fatalf("round %d: a journaled array was resynced after the kill", round)
					}
					crashVerify(t, d, st, round)
					if det := syncAction(t, runDir, md, "check"); det.Sync.Mismatches != 0 {
						t.Fatalf("round %d: check after the replay found %d mismatches", round, det.Sync.Mismatches)
					}
				}
				if round == rounds {
					d.stop()
					break
				}
				if c.writeBack {
					// md's journal_mode: every start is write-through
					if code, _, errs := mdtool(t, "action", "--run-dir", runDir, "--journal-mode=write-back", md); code != 0 {
						t.Fatalf("round %d: --journal-mode=write-back: exit %d: %s", round, code, errs)
					}
				}
				cfg := crashload.Config{Seed: rng.Uint64(), ReadPercent: 10,
					FlushEvery: time.Duration(5+rng.IntN(20)) * time.Millisecond}
				wait := killMidWorkload(t, d, st, cfg, rng)
				if sb := readSB12(t, devs[0]); sb.ResyncOffset != superblock.MaxSector {
					t.Fatalf("round %d: resync_offset %d while active: a journaled array records MaxSector", round, sb.ResyncOffset)
				}
				if err := wait(); err != nil {
					t.Fatalf("round %d: workload: %v", round, err)
				}
				if round == rounds-1 {
					var imgs []string
					for i, p := range devs {
						cp := filepath.Join(dir, fmt.Sprintf("kj-%s-%d.img", lv.name, i))
						copyFile(t, p, cp)
						imgs = append(imgs, cp)
					}
					forKernel = append(forKernel, crashed{lv.name, imgs, st.Clone()})
				}
			}
			if replays == 0 {
				t.Errorf("no restart of the %d found io_units to replay: the replay went untested", rounds)
			}
			if c.writeBack && dataOnly == 0 {
				t.Errorf("no restart of the %d found data-only stripes (write-back data not yet on the members): write-back went untested", rounds)
			}
			t.Logf("%d rounds: %d writes acknowledged, %d flushes, %d blocks durable, %d restarts replayed the log, %d of them data-only stripes",
				rounds, st.Acked, st.Flushes, st.DurableBlocks(), replays, dataOnly)
		})
		if !ok {
			return
		}
	}

	share := filepath.Join(dir, "share")
	os.MkdirAll(share, 0o755)
	var disks []mdvm.Disk
	var script strings.Builder
	for i, k := range forKernel {
		guest := cowDisks(&disks, k.imgs)
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&script, "dmesg -c >/dev/null\n")
		fmt.Fprintf(&script, "mdadm --assemble %s %s || { echo \"ASSEMBLY FAILED %s\"; cat /proc/mdstat; }\n", md, strings.Join(guest, " "), k.name)
		fmt.Fprintf(&script, "echo \"REPLAY %s $(dmesg | sed -n 's/.*md\\/raid:md%d: recovering \\(.*\\)/\\1/p')\"\n", k.name, i)
		fmt.Fprintf(&script, "mdadm --wait %s; echo \"LAST %s $(cat %s/last_sync_action)\"\n", md, k.name, sys)
		fmt.Fprintf(&script, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&script, "echo \"MISMATCH %s $(cat %s/mismatch_cnt) $(cat %s/last_sync_action)\"\n", k.name, sys, sys)
		fmt.Fprintf(&script, "dd if=%s of=/share/%s.bin bs=1M 2>/dev/null; echo \"DUMPED %s $?\"\n", md, k.name, k.name)
		fmt.Fprintf(&script, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: script.String(), Share: share, Timeout: 600 * time.Second}))
	field := func(tag, name string) string {
		m := regexp.MustCompile(`(?m)^` + tag + ` ` + regexp.QuoteMeta(name) + ` ?(.*)$`).FindStringSubmatch(out)
		if m == nil {
			return "<none>"
		}
		return m[1]
	}
	for _, k := range forKernel {
		t.Logf("kernel on the crashed journaled %s: replay %q, after assembly %s, check %s", k.name,
			field("REPLAY", k.name), field("LAST", k.name), field("MISMATCH", k.name))
		if got := field("LAST", k.name); got == "resync" {
			t.Errorf("%s: the kernel resynced mdtool's journaled array", k.name)
		}
		if got := field("MISMATCH", k.name); got != "0 check" {
			t.Errorf("%s: kernel check: mismatch_cnt and action %q, want \"0 check\"", k.name, got)
		}
		f, err := os.Open(filepath.Join(share, k.name+".bin"))
		if err != nil {
			t.Errorf("%s: %v\n%s", k.name, err, out)
			continue
		}
		r, err := k.state.VerifyImage(f)
		f.Close()
		if err != nil || !r.OK() {
			t.Errorf("%s: what the kernel reads from the crashed array: %v %s", k.name, err, r)
		}
	}
	if t.Failed() {
		t.Logf("guest output:\n%s", out)
	}
}
