package cmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
)

// loadRunner runs the crashload workload (writes, flushes, checked reads)
// on an array until stopped.
type loadRunner struct {
	cancel context.CancelFunc
	done   chan error
	client *crashload.Client
}

func startLoad(t *testing.T, sock string, st *crashload.State, seed uint64) *loadRunner {
	t.Helper()
	c, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	l := &loadRunner{cancel: cancel, done: make(chan error, 1), client: c}
	go func() {
		l.done <- st.Run(ctx, c, crashload.Config{Seed: seed, Workers: 4, ReadPercent: 30, FlushEvery: 20 * time.Millisecond})
	}()
	return l
}

// stop ends the workload and fails the test if it found anything wrong.
func (l *loadRunner) stop(t *testing.T, what string) {
	t.Helper()
	l.cancel()
	err := <-l.done
	l.client.Close()
	if err != nil {
		t.Fatalf("workload during %s: %v", what, err)
	}
}

// TestRecoveryUnderLoad rebuilds a failed member onto a spare and then
// hot-replaces another member (--replace --with) while a workload of
// random writes, flushes and checked reads keeps running (the sync speed
// is limited so that they overlap): no read during the recovery returns
// older data than was acknowledged, every flushed write reads back
// afterwards, check finds 0 mismatches, and the kernel's check of the
// images agrees and reads the same contents.
func TestRecoveryUnderLoad(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	levels := []struct {
		name          string
		n             int
		fail, replace int
		opts          []string
	}{
		{"raid1", 2, 1, 0, []string{"-l1", "-n2", "--bitmap=internal", "--bitmap-chunk=64K"}},
		{"raid5", 4, 0, 3, []string{"-l5", "-n4", "-c", "64", "--bitmap=internal", "--bitmap-chunk=64K"}},
		{"raid6", 4, 2, 1, []string{"-l6", "-n4", "-c", "64"}},
		{"raid10", 4, 3, 0, []string{"-l10", "-n4", "-c", "64"}},
	}
	var sets []kernelCheck
	for i, lv := range levels {
		t.Run(lv.name, func(t *testing.T) {
			md := "/dev/md/ld" + lv.name
			devs := mkArray(t, dir, md, lv.n, 12<<20, append(lv.opts, "--assume-clean")...)
			s := serve(t, runDir, md, devs...)
			sock := daemon.PathsFor(runDir, s.name).NBD()
			st := crashload.NewState(arraySize(t, runDir, s.name))
			// 12 MiB members at 4 MB/s: each sync takes ~3 s.
			if code, _, errs := mdtool(t, "action", "--run-dir", runDir, "--sync-speed-min", "1000", "--sync-speed-max", "4000", md); code != 0 {
				t.Fatalf("action --sync-speed-max: exit %d: %s", code, errs)
			}
			l := startLoad(t, sock, st, uint64(i))
			time.Sleep(200 * time.Millisecond)
			manage(t, runDir, md, "--fail", devs[lv.fail])
			manage(t, runDir, md, "--remove", devs[lv.fail])
			spare := sparse(t, dir, "ld"+lv.name+"-spare.img", 12<<20)
			manage(t, runDir, md, "--add", spare)
			d := waitFor(t, runDir, md, "recover")
			l.stop(t, "the rebuild")
			if d.ActiveDevices != lv.n {
				t.Fatalf("after the rebuild: %d active devices", d.ActiveDevices)
			}
			acked := st.Acked

			l = startLoad(t, sock, st, uint64(100+i))
			spare2 := sparse(t, dir, "ld"+lv.name+"-spare2.img", 12<<20)
			manage(t, runDir, md, "--add", spare2)
			if code, out, errs := mdtool(t, "manage", "--run-dir", runDir, md, "--replace", devs[lv.replace], "--with", spare2); code != 0 {
				t.Fatalf("--replace: exit %d: %s%s", code, out, errs)
			}
			d = waitFor(t, runDir, md, "recover")
			l.stop(t, "the replacement")
			var replaced, took bool
			for _, m := range d.Devices {
				st := strings.Join(m.State, " ")
				if m.Path == devs[lv.replace] && strings.Contains(st, "faulty") {
					replaced = true
				}
				if m.Path == spare2 && st == "active sync" && m.RaidDevice != nil && *m.RaidDevice == lv.replace {
					took = true
				}
			}
			if !replaced || !took || d.ActiveDevices != lv.n {
				t.Errorf("after --replace: old member faulty %v, spare in its role %v, %d active", replaced, took, d.ActiveDevices)
			}
			t.Logf("%d writes during the rebuild, %d during the replacement, %d checked reads in all", acked, st.Acked-acked, st.Reads)
			if acked == 0 || st.Acked == acked {
				t.Errorf("the workload did not run during both syncs")
			}

			c, err := crashload.Dial(sock)
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Verify(c)
			c.Close()
			if err != nil || !r.OK() {
				t.Fatalf("after the syncs: %v %s", err, r)
			}
			if d := syncAction(t, runDir, md, "check"); d.Sync.Mismatches != 0 {
				t.Errorf("check: %d mismatches", d.Sync.Mismatches)
			}
			sum := md5hex(readArray(t, sock, arraySize(t, runDir, s.name)))
			s.stop()
			imgs := append([]string{}, devs...)
			imgs[lv.fail] = spare
			imgs[lv.replace] = spare2
			sets = append(sets, kernelCheck{name: "load-" + lv.name, imgs: imgs, md5: sum})
		})
	}
	if t.Failed() {
		return
	}
	kernelChecks(t, sets)
}
