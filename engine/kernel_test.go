package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// kspec is an array for the kernel interop test.
type kspec struct {
	spec
	resync bool // let the kernel resync instead of --assume-clean
	// degradedWrite: after the normal writes, the engine writes more with
	// these members left out; the kernel must then assemble the array
	// degraded and read what the engine wrote.
	degradedWrite []int
	// crash: the engine "crashes" after its writes (the array is never
	// closed), opens the array again, resyncs it and closes it.
	crash bool
}

func kernelSpecs() []kspec {
	var out []kspec
	for _, s := range allSpecs() {
		if len(s.devMiB) == 0 {
			s.devMiB = []int{4}
		}
		out = append(out, kspec{spec: s})
	}
	out = append(out,
		kspec{spec: spec{level: "raid1", n: 2, bitmap: true, metadata: "1.1", devMiB: []int{4}}},
		kspec{spec: spec{level: "raid1", n: 2, devMiB: []int{4}}, resync: true},
		kspec{spec: spec{level: "raid4", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{4}}},
		kspec{spec: spec{level: "raid5", layout: "left-symmetric", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{4}}},
		kspec{spec: spec{level: "raid5", layout: "left-symmetric", n: 4, chunkKiB: 64, bitmap: true, metadata: "1.0", devMiB: []int{4}}},
		kspec{spec: spec{level: "raid5", layout: "left-symmetric", n: 5, devMiB: []int{4}}, resync: true}, // 512 KiB chunk
		kspec{spec: spec{level: "raid6", layout: "left-symmetric", n: 6, chunkKiB: 128, bitmap: true, devMiB: []int{4}}},
		kspec{spec: spec{level: "raid6", layout: "right-asymmetric", n: 4, chunkKiB: 64, devMiB: []int{4}}, resync: true},
		kspec{spec: spec{level: "raid10", layout: "n2", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{4}}},
		kspec{spec: spec{level: "raid10", layout: "f2", n: 4, chunkKiB: 64, bitmap: true, metadata: "1.0", devMiB: []int{4}}},
		kspec{spec: spec{level: "raid5", layout: "left-symmetric", n: 4, chunkKiB: 64, devMiB: []int{4}}, degradedWrite: []int{1}},
		kspec{spec: spec{level: "raid5", layout: "left-asymmetric", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{4}}, degradedWrite: []int{3}},
		kspec{spec: spec{level: "raid6", layout: "left-symmetric", n: 5, chunkKiB: 64, devMiB: []int{4}}, degradedWrite: []int{0, 3}},
		kspec{spec: spec{level: "raid6", layout: "ddf-N-continue", n: 5, chunkKiB: 64, devMiB: []int{4}}, degradedWrite: []int{2}},
		kspec{spec: spec{level: "raid10", layout: "n2", n: 4, chunkKiB: 64, devMiB: []int{4}}, degradedWrite: []int{1}},
		kspec{spec: spec{level: "raid1", n: 3, bitmap: true, devMiB: []int{4}}, degradedWrite: []int{0}},
		kspec{spec: spec{level: "raid5", layout: "left-symmetric", n: 4, chunkKiB: 64, bitmap: true, devMiB: []int{4}}, crash: true},
		kspec{spec: spec{level: "raid6", layout: "right-symmetric", n: 5, chunkKiB: 64, devMiB: []int{4}}, crash: true},
		kspec{spec: spec{level: "raid10", layout: "o2", n: 3, chunkKiB: 64, devMiB: []int{4}}, crash: true},
	)
	return out
}

// mdadmArgs is the mdadm --create command line for s.
func (s kspec) mdadmArgs(md int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mdadm --create /dev/md%d --run --homehost=any --name=t%d --level=%s --raid-devices=%d", md, md, s.level, s.n)
	if s.metadata != "" {
		fmt.Fprintf(&b, " --metadata=%s", s.metadata)
	}
	if s.layout != "" {
		fmt.Fprintf(&b, " --layout=%s", s.layout)
	}
	if s.chunkKiB != 0 {
		fmt.Fprintf(&b, " --chunk=%d", s.chunkKiB)
	}
	if s.level != "raid0" && s.level != "linear" {
		if s.bitmap {
			b.WriteString(" --bitmap=internal")
		} else {
			b.WriteString(" --bitmap=none")
		}
	}
	if !s.resync {
		b.WriteString(" --assume-clean")
	}
	return b.String()
}

// dropFor lists the members left out of the degraded read check.
func (s kspec) dropFor() []int {
	switch s.level {
	case "raid1", "raid10":
		return []int{0}
	case "raid4", "raid5":
		return []int{1}
	case "raid6":
		return []int{0, 2}
	}
	return nil
}

type region struct{ off, size int64 }

const patternSize = 64 << 20

func patternBytes() []byte {
	p := make([]byte, patternSize)
	fillPattern(rand.New(rand.NewChaCha8([32]byte{'m', 'd'})), p)
	return p
}

// TestKernelInterop checks the engine against Linux 6.1 md for every level
// and layout:
//
//	(b) arrays created by mdadm and written by the kernel read back
//	    identically through the engine;
//	(c) the same with members missing (degraded reads);
//	(a) data the engine writes (aligned and unaligned requests) is what
//	    the kernel reads after assembling, the kernel's check finds no
//	    mismatch, and the arrays assemble clean (no resync).
//
// All arrays live in one sparse image (each member a loop device over a
// region of /dev/vda); two VM runs in total.
func TestKernelInterop(t *testing.T) {
	mdvm.Require(t)
	specs := kernelSpecs()
	dir := t.TempDir()
	img := filepath.Join(dir, "members.img")
	pat := filepath.Join(dir, "pattern.img")
	pattern := patternBytes()
	if err := os.WriteFile(pat, pattern, 0o644); err != nil {
		t.Fatal(err)
	}
	regions := make([][]region, len(specs))
	var off int64 = 1 << 20
	for i, s := range specs {
		for d := 0; d < s.n; d++ {
			sz := s.devSize(d)
			regions[i] = append(regions[i], region{off, sz})
			off += (sz + 1<<20 - 1) &^ (1<<20 - 1)
		}
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(off)
	f.Close()

	// batched runs the per-array script bodies four at a time in
	// background subshells (the guest has two vCPUs and most of the time
	// goes to process start-up and waiting); "$D" in a body names the
	// array's member loop devices.
	const par = 4
	batched := func(ids []int, body func(i int) string) string {
		var b strings.Builder
		b.WriteString("LO=/usr/bin/losetup\n")
		for k := 0; k < len(ids); k += par {
			batch := ids[k:min(k+par, len(ids))]
			for _, i := range batch {
				fmt.Fprintf(&b, "D%d=''\n", i)
				for _, r := range regions[i] {
					fmt.Fprintf(&b, "D%d=\"$D%d $($LO --offset %d --sizelimit %d --direct-io=on --show -f /dev/vda)\"\n", i, i, r.off, r.size)
				}
			}
			for _, i := range batch {
				fmt.Fprintf(&b, "(\n%s) >/tmp/o%d 2>&1 &\n", strings.ReplaceAll(body(i), "$D", fmt.Sprintf("$D%d", i)), i)
			}
			b.WriteString("wait\n")
			for _, i := range batch {
				fmt.Fprintf(&b, "cat /tmp/o%d\n$LO -d $D%d\n", i, i)
			}
		}
		return b.String()
	}
	all := make([]int, len(specs))
	for i := range all {
		all[i] = i
	}

	// Phase 1: the kernel creates every array and writes the pattern.
	script := batched(all, func(i int) string {
		s := specs[i]
		var sc strings.Builder
		fmt.Fprintf(&sc, "%s $D >/tmp/c%d 2>&1 || { echo \"ERR %d create\"; cat /tmp/c%d; }\n", s.mdadmArgs(i), i, i, i)
		fmt.Fprintf(&sc, "SZ=$(blockdev --getsize64 /dev/md%d)\n", i)
		fmt.Fprintf(&sc, "echo \"SIZE %d $SZ\"\n", i)
		fmt.Fprintf(&sc, "dd if=/dev/vdb of=/dev/md%d bs=1M skip=%d count=$((SZ>>20)) oflag=direct 2>/dev/null || echo \"ERR %d dd\"\n", i, i, i)
		fmt.Fprintf(&sc, "dd if=/dev/vdb of=/dev/md%d bs=4096 skip=$((%d*256+(SZ>>20)*256)) seek=$(((SZ>>20)*256)) count=$(((SZ&1048575)/4096)) oflag=direct 2>/dev/null || echo \"ERR %d dd\"\n", i, i, i)
		if s.resync {
			fmt.Fprintf(&sc, "mdadm --wait /dev/md%d >/dev/null 2>&1\n", i)
		}
		fmt.Fprintf(&sc, "mdadm --stop /dev/md%d >/dev/null 2>&1 || echo \"ERR %d stop\"\n", i, i)
		return sc.String()
	})
	start := time.Now()
	out := mdvm.MustExec(t, mdvm.Run{
		Disks:   []mdvm.Disk{{Path: img}, {Path: pat, Mode: mdvm.RO}},
		Bins:    []string{"/usr/sbin/losetup"},
		Script:  script,
		Timeout: 1800 * time.Second,
	})
	t.Logf("phase 1 (kernel create + write): %v", time.Since(start))
	sizes := map[int]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ERR") {
			t.Errorf("guest: %s", line)
		}
		var i int
		var sz int64
		if _, err := fmt.Sscanf(line, "SIZE %d %d", &i, &sz); err == nil && strings.HasPrefix(line, "SIZE") {
			sizes[i] = sz
		}
	}
	if t.Failed() {
		t.Fatalf("phase 1 output:\n%s", out)
	}

	// Host: read back (b), degraded (c), then write (a).
	fd, err := OpenFile(img, FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	members := func(i int, skip ...int) []Device {
		var ds []Device
	outer:
		for d, r := range regions[i] {
			for _, s := range skip {
				if s == d {
					continue outer
				}
			}
			ds = append(ds, Section(fd, r.off, r.size))
		}
		return ds
	}
	want := make([]string, len(specs))
	for i, s := range specs {
		name := fmt.Sprintf("%d-%v", i, s.spec)
		ok := t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			o.NoDaemon = true
			o.ReadOnly = true
			a, err := Open(members(i), o)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if a.Size() != sizes[i] {
				t.Fatalf("array size %d, kernel says %d", a.Size(), sizes[i])
			}
			exp := pattern[i<<20 : i<<20+int(a.Size())]
			got := make([]byte, a.Size())
			if _, err := a.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, exp) {
				t.Errorf("(b) kernel-written data differs at byte %d", firstDiff(got, exp))
			}
			a.Close()
			if drop := s.dropFor(); drop != nil {
				a, err := Open(members(i, drop...), o)
				if err != nil {
					t.Fatalf("(c) open without members %v: %v", drop, err)
				}
				clear(got)
				if _, err := a.ReadAt(got, 0); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, exp) {
					t.Errorf("(c) degraded read without members %v differs at byte %d", drop, firstDiff(got, exp))
				}
				a.Close()
			}
			// (a) write through the engine
			wo := DefaultOptions()
			if s.crash {
				wo.NoDaemon = true
			}
			a, err = Open(members(i), wo)
			if err != nil {
				t.Fatal(err)
			}
			m := &model{b: append([]byte(nil), exp...)}
			workload(t, a, m, uint64(i), 40)
			if s.crash {
				// never closed: reopen dirty, resync, close. Without
				// NoAutoSync the open starts the resync itself, and
				// on a loaded machine it can be over before
				// NeedsResync looks.
				ro := DefaultOptions()
				ro.NoAutoSync = true
				a, err = Open(members(i), ro)
				if err != nil {
					t.Fatal(err)
				}
				if need, _ := a.NeedsResync(); !need {
					t.Errorf("crashed array does not need a resync")
				}
				if err := a.Resync(context.Background()); err != nil {
					t.Fatalf("resync: %v", err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if s.degradedWrite != nil {
				a, err = Open(members(i, s.degradedWrite...), DefaultOptions())
				if err != nil {
					t.Fatalf("degraded open: %v", err)
				}
				workload(t, a, m, uint64(i)+1000, 30)
				if err := a.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
			}
			sum := md5.Sum(m.b)
			want[i] = hex.EncodeToString(sum[:])
		})
		if !ok {
			want[i] = ""
		}
	}

	// Phase 2: the kernel assembles, reads and checks.
	var ids []int
	for i := range specs {
		if want[i] != "" {
			ids = append(ids, i)
		}
	}
	script = batched(ids, func(i int) string {
		s := specs[i]
		var sc strings.Builder
		exm := 0
		for contains(s.degradedWrite, exm) {
			exm++
		}
		fmt.Fprintf(&sc, "set -- $D; M=$%d\n", exm+1)
		fmt.Fprintf(&sc, "echo \"EXAMINE %d $(mdadm -E $M | grep -E '^ *(Events|State) :' | tr -s ' ' | tr '\\n' ' ')\"\n", i)
		if s.bitmap {
			fmt.Fprintf(&sc, "echo \"BITMAP %d $(mdadm -X $M | grep -E '^ *(Events|Events Cleared|Bitmap) :' | tr -s ' ' | tr '\\n' ' ')\"\n", i)
		}
		fmt.Fprintf(&sc, "mdadm --assemble /dev/md%d $D >/tmp/a%d 2>&1 || { echo \"ERR %d assemble\"; cat /tmp/a%d; }\n", i, i, i, i)
		fmt.Fprintf(&sc, "S=/sys/block/md%d/md\n", i)
		fmt.Fprintf(&sc, "echo \"STATE %d $(cat $S/array_state) $(cat $S/degraded 2>/dev/null || echo 0) $(cat $S/sync_action 2>/dev/null || echo none) $(cat $S/resync_start 2>/dev/null || echo none)\"\n", i)
		fmt.Fprintf(&sc, "echo \"MD5 %d $(md5sum </dev/md%d | cut -c1-32)\"\n", i, i)
		if s.level != "raid0" && s.level != "linear" && s.degradedWrite == nil {
			fmt.Fprintf(&sc, "echo check > $S/sync_action; sleep 0.1; mdadm --wait /dev/md%d >/dev/null 2>&1\n", i)
			fmt.Fprintf(&sc, "echo \"MISMATCH %d $(cat $S/mismatch_cnt)\"\n", i)
		}
		fmt.Fprintf(&sc, "mdadm --stop /dev/md%d >/dev/null 2>&1 || echo \"ERR %d stop\"\n", i, i)
		return sc.String()
	})
	start = time.Now()
	out = mdvm.MustExec(t, mdvm.Run{
		Disks:   []mdvm.Disk{{Path: img, Mode: mdvm.COW}},
		Bins:    []string{"/usr/sbin/losetup"},
		Script:  script,
		Timeout: 1800 * time.Second,
	})
	t.Logf("phase 2 (kernel assemble + md5 + check): %v", time.Since(start))
	got := map[string]map[int]string{"STATE": {}, "MD5": {}, "MISMATCH": {}, "EXAMINE": {}, "BITMAP": {}}
	sn := bufio.NewScanner(bytes.NewReader(out))
	for sn.Scan() {
		line := sn.Text()
		if strings.HasPrefix(line, "ERR") {
			t.Errorf("guest: %s", line)
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 3 {
			continue
		}
		if m, ok := got[fs[0]]; ok {
			i, _ := strconv.Atoi(fs[1])
			m[i] = strings.Join(fs[2:], " ")
		}
	}
	for i, s := range specs {
		if want[i] == "" {
			continue
		}
		name := fmt.Sprintf("%d-%v", i, s.spec)
		st := strings.Fields(got["STATE"][i])
		switch {
		case len(st) < 4:
			t.Errorf("%s: no state reported", name)
		case st[0] != "clean" || st[1] != strconv.Itoa(len(s.degradedWrite)) || (st[2] != "idle" && st[2] != "none") || st[3] != "none":
			t.Errorf("%s: kernel state after assembly: array_state=%s degraded=%s sync_action=%s resync_start=%s (want clean %d idle none)",
				name, st[0], st[1], st[2], st[3], len(s.degradedWrite))
		}
		ex := got["EXAMINE"][i]
		if !strings.Contains(ex, "State : clean") {
			t.Errorf("%s: mdadm --examine of member 0 after the engine closed it: %s", name, ex)
		}
		if s.bitmap {
			bm := got["BITMAP"][i]
			var sbEv, bmEv, bmCl uint64
			fmt.Sscanf(ex[strings.Index(ex, "Events :")+len("Events :"):], "%d", &sbEv)
			if k := strings.Index(bm, "Events :"); k >= 0 {
				fmt.Sscanf(bm[k+len("Events :"):], "%d", &bmEv)
			}
			if k := strings.Index(bm, "Events Cleared :"); k >= 0 {
				fmt.Sscanf(bm[k+len("Events Cleared :"):], "%d", &bmCl)
			}
			if bmEv != sbEv || bmCl > bmEv {
				t.Errorf("%s: bitmap events %d (cleared %d), superblock events %d: %s", name, bmEv, bmCl, sbEv, bm)
			}
			if s.degradedWrite == nil && !strings.Contains(bm, " 0 dirty") {
				t.Errorf("%s: bitmap has dirty bits after a clean close: %s", name, bm)
			}
			if s.degradedWrite != nil && strings.Contains(bm, " 0 dirty") {
				t.Errorf("%s: degraded writes left no dirty bits: %s", name, bm)
			}
		}
		if got["MD5"][i] != want[i] {
			t.Errorf("%s: kernel reads md5 %s, engine wrote %s", name, got["MD5"][i], want[i])
		}
		if s.level != "raid0" && s.level != "linear" && s.degradedWrite == nil && got["MISMATCH"][i] != "0" {
			t.Errorf("%s: mismatch_cnt %q after check", name, got["MISMATCH"][i])
		}
	}
	if t.Failed() {
		t.Logf("phase 2 output:\n%s", out)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
