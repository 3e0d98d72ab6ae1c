package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelResumesEngineCheckpoints: what the engine records while a
// recovery or a resync runs (recovery_offset, resync_offset, written every
// 1/16 of the range or 5 minutes, also without a bitmap) is what Linux 6.1
// resumes from. The engine runs each action until half done and the images
// are taken as they are then (a crash); the kernel assembles them, reports
// the recorded offset in sysfs (recovery_start, resync_start), finishes
// the action, and its check finds no mismatch and the engine's data.
func TestKernelResumesEngineCheckpoints(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	type result struct {
		name   string
		imgs   []string
		sysfs  string // attribute under /sys/block/mdN/md/ holding the offset
		offset uint64
		md5    string
	}
	var results []result
	for _, c := range []struct {
		name   string
		s      spec
		resync bool
	}{
		{"raid1-recover", spec{level: "raid1", n: 2, devMiB: []int{16}}, false},
		{"raid5-recover", spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{16}}, false},
		{"raid1-resync", spec{level: "raid1", n: 2, devMiB: []int{16}}, true},
	} {
		mems := create(t, c.s)
		clk := &fakeClock{t: time.Unix(1700000100, 0)}
		o := recoverOptions()
		o.Clock = clk.Now
		var skip []int
		if !c.resync {
			skip = []int{1} // the member a spare rebuilds
		}
		a := open(t, mems, o, skip...)
		data := make([]byte, a.Size())
		fillPattern(newRand(5), data)
		if _, err := a.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(data)
		if c.resync {
			// a crash (no Close) leaves a resync pending
			a = open(t, mems, o)
		}
		clk.Add(time.Second)
		if err := a.Tick(); err != nil || !a.Clean() {
			t.Fatalf("%s: not clean after safe mode: %v", c.name, err)
		}
		// Hold the action at half way: the throttle's sleep blocks there
		// (before that the clock jumps an hour a sleep, so the rate is
		// always under the limit).
		half := make(chan struct{})
		var once sync.Once
		a.SetSyncLimits(SyncLimits{MinKBps: 1, MaxKBps: 1})
		a.sc.sleep = func(ctx context.Context, d time.Duration) {
			if st := a.SyncStatus(); st.Done < st.Total/2 {
				clk.Add(time.Hour)
				return
			}
			once.Do(func() { close(half) })
			<-ctx.Done()
		}
		spare := NewMemDevice(c.s.devSize(1))
		devs := mems
		if c.resync {
			if err := a.StartAction(ActionResync); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := a.AddDevice(spare.Reopen(), AddOptions{Replacement: -1}); err != nil {
				t.Fatal(err)
			}
			if err := a.StartAction(ActionRecover); err != nil && err != ErrBusy {
				t.Fatal(err)
			}
			devs = []*MemDevice{mems[0], spare}
			if c.s.level == "raid5" {
				devs = []*MemDevice{mems[0], spare, mems[2]}
			}
		}
		select {
		case <-half:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the action never got half way: %+v", c.name, a.SyncStatus())
		}
		r := result{name: c.name, md5: hex.EncodeToString(sum[:])}
		for i, d := range devs {
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.img", c.name, i))
			saveImage(t, d, p) // the crash image
			r.imgs = append(r.imgs, p)
		}
		sb := readSB(t, devs[1])
		if c.resync {
			r.sysfs, r.offset = "resync_start", sb.ResyncOffset
		} else {
			r.sysfs, r.offset = "dev-vdb/recovery_start", sb.RecoveryOffset // the spare is the second disk
		}
		if st := a.SyncStatus(); r.offset == 0 || r.offset > st.Done || r.offset >= st.Total {
			t.Fatalf("%s: recorded offset %d while held at %d of %d", c.name, r.offset, st.Done, st.Total)
		}
		a.Close()
		results = append(results, r)
	}

	// The kernel, one VM run an array (the test arrays share a UUID),
	// read-only at first, so that the offset is read before the action
	// moves on.
	for _, r := range results {
		var guest []string
		var disks []mdvm.Disk
		for _, p := range r.imgs {
			guest = append(guest, fmt.Sprintf("/dev/vd%c", 'a'+len(disks)))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		script := fmt.Sprintf(`mdadm --assemble /dev/md0 --run --readonly %s >/tmp/a 2>&1 || { echo ERR assemble; cat /tmp/a; }
echo "OFF 0 $(cat /sys/block/md0/md/%s)"
mdadm --readwrite /dev/md0 || echo ERR readwrite
sleep 0.3
mdadm --wait /dev/md0 >/dev/null 2>&1
echo "DEG 0 $(cat /sys/block/md0/md/degraded)"
echo check > /sys/block/md0/md/sync_action; sleep 0.3; mdadm --wait /dev/md0 >/dev/null 2>&1
echo "MM 0 $(cat /sys/block/md0/md/mismatch_cnt)"
echo "MD5 0 $(md5sum < /dev/md0 | cut -d' ' -f1)"
mdadm --stop /dev/md0 >/dev/null 2>&1
`, strings.Join(guest, " "), r.sysfs)
		out := execRetry(t, mdvm.Run{Disks: disks, Script: script, Timeout: 300 * time.Second}, nil)
		t.Logf("%s in the kernel:\n%s", r.name, out)
		if bytes.Contains(out, []byte("ERR")) {
			t.Fatalf("%s: kernel assembly failed:\n%s", r.name, out)
		}
		kv := vmLines(out)
		if got := kv["OFF 0"]; got != strconv.FormatUint(r.offset, 10) {
			t.Errorf("%s: the kernel's %s is %q, the engine recorded %d", r.name, r.sysfs, got, r.offset)
		}
		if kv["DEG 0"] != "0" || kv["MM 0"] != "0" {
			t.Errorf("%s: after the kernel finished: degraded %q, mismatch_cnt %q", r.name, kv["DEG 0"], kv["MM 0"])
		}
		if kv["MD5 0"] != r.md5 {
			t.Errorf("%s: the kernel reads md5 %s, the engine wrote %s", r.name, kv["MD5 0"], r.md5)
		}
	}
}
