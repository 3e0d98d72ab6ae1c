package engine

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// TestKernelInPlaceParity: parity the engine computes straight into
// memory members (InPlaceWriter, non-temporal stores) is what Linux 6.1
// expects: whole-stripe and partial writes on raid4, raid5 and raid6 (Q
// in standard and DDF slot order) over MemDevices, saved as images; the
// kernel assembles them clean, its check finds no mismatch, and it reads
// the engine's data.
func TestKernelInPlaceParity(t *testing.T) {
	mdvm.Require(t)
	dir := t.TempDir()
	specs := []spec{
		{level: "raid4", n: 4, chunkKiB: 64, devMiB: []int{8}},
		{level: "raid5", layout: "left-symmetric", n: 5, chunkKiB: 64, devMiB: []int{8}},
		{level: "raid6", layout: "left-symmetric", n: 6, chunkKiB: 64, devMiB: []int{8}},
		{level: "raid6", layout: "ddf-N-continue", n: 5, chunkKiB: 32, devMiB: []int{8}},
	}
	var sums []string
	var sc strings.Builder
	var disks []mdvm.Disk
	for k, s := range specs {
		mems := create(t, s)
		devs := make([]*inPlaceDev, len(mems))
		list := make([]Device, len(mems))
		for i, m := range mems {
			devs[i] = &inPlaceDev{MemDevice: m}
			devs[i].setMode("pass")
			list[i] = devs[i]
		}
		a, err := Open(list, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, a.Size())
		fillPattern(newRand(uint64(k)+3), data)
		stripe := a.IOOpt()
		// whole stripes in 1 MiB-ish requests, then partial writes over them
		for off := int64(0); off < a.Size(); {
			n := min(4*stripe, a.Size()-off)
			if _, err := a.WriteAt(data[off:off+n], off); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		r := newRand(uint64(k) + 9)
		for i := 0; i < 50; i++ {
			off := r.Int64N(a.Size()/4096-4) * 4096
			fillPattern(r, data[off:off+8192])
			if _, err := a.WriteAt(data[off:off+8192], off); err != nil {
				t.Fatal(err)
			}
		}
		var inPlace int64
		for _, d := range devs {
			inPlace += d.inPlace.Load()
		}
		if inPlace == 0 {
			t.Fatalf("%v: no parity was computed in place", s)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(data)
		sums = append(sums, hex.EncodeToString(sum[:]))
		var guest []string
		for i, m := range mems {
			p := filepath.Join(dir, fmt.Sprintf("a%d-%d.img", k, i))
			saveImage(t, m, p)
			guest = append(guest, fmt.Sprintf("/dev/vd%c", 'a'+len(disks)))
			disks = append(disks, mdvm.Disk{Path: p, Mode: mdvm.COW})
		}
		// one array at a time: the test arrays share a UUID
		fmt.Fprintf(&sc, "mdadm --assemble /dev/md0 %s >/tmp/a 2>&1 || { echo \"ERR %d assemble\"; cat /tmp/a; }\n", strings.Join(guest, " "), k)
		fmt.Fprintf(&sc, "echo \"STATE %d $(cat /sys/block/md0/md/array_state) $(cat /sys/block/md0/md/sync_action)\"\n", k)
		sc.WriteString("echo check > /sys/block/md0/md/sync_action; sleep 0.3; mdadm --wait /dev/md0 >/dev/null 2>&1\n")
		fmt.Fprintf(&sc, "echo \"MM %d $(cat /sys/block/md0/md/mismatch_cnt)\"\n", k)
		fmt.Fprintf(&sc, "echo \"MD5 %d $(md5sum < /dev/md0 | cut -d' ' -f1)\"\n", k)
		sc.WriteString("mdadm --stop /dev/md0 >/dev/null 2>&1\n")
	}
	out := execRetry(t, mdvm.Run{Disks: disks, Script: sc.String(), Timeout: 300 * time.Second}, nil)
	t.Logf("kernel run:\n%s", out)
	if bytes.Contains(out, []byte("ERR")) {
		t.Fatalf("kernel assembly failed:\n%s", out)
	}
	kv := vmLines(out)
	for k, s := range specs {
		id := strconv.Itoa(k)
		if kv["STATE "+id] != "clean" || kv["MM "+id] != "0" || kv["MD5 "+id] != sums[k] {
			t.Errorf("%v in the kernel: state %q, mismatch_cnt %q, md5 %s (engine wrote %s)", s, kv["STATE "+id], kv["MM "+id], kv["MD5 "+id], sums[k])
		}
	}
}
