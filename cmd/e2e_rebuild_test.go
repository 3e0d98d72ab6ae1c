package cmd

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/crashload"
	"mdtool/internal/daemon"
	"mdtool/internal/mdvm"
)

// e2eDetail is what the end-to-end tests read from detail --json.
type e2eDetail struct {
	State []string `json:"state"`
	Sync  struct {
		Action         string `json:"action"`
		LastAction     string `json:"last_action"`
		Mismatches     uint64 `json:"mismatch_cnt"`
		WrittenSectors uint64 `json:"written_sectors"`
		DoneSectors    uint64 `json:"done_sectors"`
		TotalSectors   uint64 `json:"total_sectors"`
	} `json:"sync"`
	Devices []struct {
		RaidDevice *int     `json:"raid_device"`
		State      []string `json:"state"`
		Path       string   `json:"path"`
	} `json:"devices"`
	ActiveDevices int `json:"active_devices"`
	FailedDevices int `json:"failed_devices"`
	SpareDevices  int `json:"spare_devices"`
}

// detailOf runs mdtool detail --json on a running array.
func detailOf(t *testing.T, runDir, md string) e2eDetail {
	t.Helper()
	code, out, errs := mdtool(t, "detail", "--json", "--run-dir", runDir, md)
	if code != 0 {
		t.Fatalf("detail --json %s: exit %d: %s", md, code, errs)
	}
	var doc struct{ Arrays []e2eDetail }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Arrays) != 1 {
		t.Fatalf("detail --json %s: %v\n%s", md, err, out)
	}
	return doc.Arrays[0]
}

// waitIdle runs mdtool wait (which returns 0 after waiting, 1 when
// nothing ran) and then makes sure detail shows no sync running.
func waitIdle(t *testing.T, runDir, md string) e2eDetail {
	t.Helper()
	return waitFor(t, runDir, md, "")
}

// waitFor is waitIdle that also waits until the last sync action is want
// (unless want is ""): the engine starts a pending resync or recovery
// from its daemon tick, so right after an assembly or an add, wait may
// find nothing running yet.
func waitFor(t *testing.T, runDir, md, want string) e2eDetail {
	t.Helper()
	code, _, errs := mdtool(t, "wait", "--poll", "20ms", "--run-dir", runDir, md)
	if code != 0 && code != 1 {
		t.Fatalf("wait %s: exit %d: %s", md, code, errs)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		d := detailOf(t, runDir, md)
		if d.Sync.Action == "idle" && (want == "" || d.Sync.LastAction == want) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: sync action %q, last %q a minute after wait returned %d; want %q done", md, d.Sync.Action, d.Sync.LastAction, code, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// manage runs mdtool manage MD OP DEV and fails the test on an error.
func manage(t *testing.T, runDir, md, op, dev string) string {
	t.Helper()
	code, out, errs := mdtool(t, "manage", "--run-dir", runDir, md, op, dev)
	if code != 0 {
		t.Fatalf("manage %s %s %s: exit %d: %s%s", md, op, dev, code, out, errs)
	}
	return errs
}

// fillRandom writes random data over [off, off+n) of the array through
// NBD and returns it.
func fillRandom(t *testing.T, sock string, off, n int64, seed uint64) []byte {
	t.Helper()
	c, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i+8 <= len(data); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8; k++ {
			data[i+k] = byte(v >> (8 * k))
		}
	}
	const step = 1 << 20
	for o := int64(0); o < n; o += step {
		e := min(o+step, n)
		if err := c.WriteAt(data[o:e], off+o); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return data
}

// readArray reads n bytes at 0 through NBD.
func readArray(t *testing.T, sock string, n int64) []byte {
	t.Helper()
	c, err := crashload.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, n)
	const step = 1 << 20
	for o := int64(0); o < n; o += step {
		if err := c.ReadAt(data[o:min(o+step, n)], o); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

var reBitmapDirty = regexp.MustCompile(`Bitmap : (\d+) bits \(chunks\), (\d+) dirty`)

// dirtyChunks runs mdtool examine-bitmap on a member and returns the
// number of chunks and of dirty chunks.
func dirtyChunks(t *testing.T, dev string) (int, int) {
	t.Helper()
	code, out, errs := mdtool(t, "examine-bitmap", dev)
	m := reBitmapDirty.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("examine-bitmap %s: exit %d: %s%s", dev, code, out, errs)
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a, b
}

// kernelArray is an image set for the final kernel check.
type kernelCheck struct {
	name string
	imgs []string
	md5  string
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// kernelChecks assembles each image set in one VM run, runs check, and
// compares mismatch_cnt (0) and the md5 of the array's contents.
func kernelChecks(t *testing.T, sets []kernelCheck) {
	t.Helper()
	var disks []mdvm.Disk
	var b strings.Builder
	for i, k := range sets {
		guest := cowDisks(&disks, k.imgs)
		md := fmt.Sprintf("/dev/md%d", i)
		sys := fmt.Sprintf("/sys/block/md%d/md", i)
		fmt.Fprintf(&b, "mdadm --assemble %s %s || { echo \"ASSEMBLY FAILED %s\"; cat /proc/mdstat; mdadm --examine %s; }\n",
			md, strings.Join(guest, " "), k.name, strings.Join(guest, " "))
		fmt.Fprintf(&b, "mdadm --wait %s\n", md)
		fmt.Fprintf(&b, "st=$(mdadm --detail %s | sed -n 's/^ *State : //p' | tr -d ' ')\n", md)
		fmt.Fprintf(&b, "echo check > %s/sync_action; sleep 0.2; mdadm --wait %s\n", sys, md)
		fmt.Fprintf(&b, "echo \"RES %s state=$st mismatch=$(cat %s/mismatch_cnt) last=$(cat %s/last_sync_action) md5=$(md5sum %s | cut -d' ' -f1)\"\n",
			k.name, sys, sys, md)
		fmt.Fprintf(&b, "mdadm --stop %s\n", md)
	}
	out := string(mdvm.MustExec(t, mdvm.Run{Disks: disks, Script: b.String(), Timeout: 600 * time.Second}))
	for _, k := range sets {
		m := regexp.MustCompile(`(?m)^RES ` + regexp.QuoteMeta(k.name) + ` state=(\S*) mismatch=(\S*) last=(\S*) md5=(\S*)$`).FindStringSubmatch(out)
		switch {
		case m == nil:
			t.Errorf("%s: no result from the kernel:\n%s", k.name, out)
		case m[1] != "clean" || m[2] != "0" || m[3] != "check" || m[4] != k.md5:
			t.Errorf("%s: kernel: state %s, mismatch_cnt %s after %s, md5 %s (want clean, 0 after check, %s)", k.name, m[1], m[2], m[3], m[4], k.md5)
		default:
			t.Logf("%s: kernel: state %s, mismatch_cnt 0, same contents", k.name, m[1])
		}
	}
}

// TestRebuildAndReAdd: (1) a member of each redundant level fails and is
// removed, data is written degraded, a fresh spare is added and mdtool
// rebuilds onto it; the data reads back identical, and the kernel's check
// of the images finds 0 mismatches and the same contents. (2) With a
// bitmap, a removed member is re-added after a few writes: the recovery
// writes exactly the chunks the bitmap marked dirty (detail --json's
// written sectors against examine-bitmap's dirty count), and again the
// kernel agrees.
func TestRebuildAndReAdd(t *testing.T) {
	mdvm.Parallel(t)
	mdvm.Require(t)
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	const memberSize = 12 << 20
	var sets []kernelCheck
	rebuild := []struct {
		name string
		n    int
		fail int
		opts []string
	}{
		{"raid1", 2, 0, []string{"-l1", "-n2"}},
		{"raid5", 4, 2, []string{"-l5", "-n4", "-c", "64", "--bitmap=internal", "--bitmap-chunk=64K"}},
		{"raid6", 4, 3, []string{"-l6", "-n4", "-c", "64"}},
		{"raid10", 4, 1, []string{"-l10", "-n4", "-c", "64", "--bitmap=internal", "--bitmap-chunk=64K"}},
	}
	for _, lv := range rebuild {
		t.Run("rebuild-"+lv.name, func(t *testing.T) {
			md := "/dev/md/rb" + lv.name
			devs := mkArray(t, dir, md, lv.n, memberSize, append(lv.opts, "--assume-clean")...)
			s := serve(t, runDir, md, devs...)
			sock := daemon.PathsFor(runDir, s.name).NBD()
			size := arraySize(t, runDir, s.name)
			data := fillRandom(t, sock, 0, size, 1)
			manage(t, runDir, md, "--fail", devs[lv.fail])
			manage(t, runDir, md, "--remove", devs[lv.fail])
			// Degraded writes: the new spare must get them.
			copy(data[size/4:], fillRandom(t, sock, size/4, size/2, 2))
			spare := sparse(t, dir, "rb"+lv.name+"-spare.img", memberSize)
			manage(t, runDir, md, "--add", spare)
			d := waitFor(t, runDir, md, "recover")
			if d.Sync.LastAction != "recover" || d.ActiveDevices != lv.n || d.FailedDevices != 0 || d.SpareDevices != 0 {
				t.Errorf("after the rebuild: last action %q, %d active, %d failed, %d spare", d.Sync.LastAction, d.ActiveDevices, d.FailedDevices, d.SpareDevices)
			}
			for _, m := range d.Devices {
				if m.Path == spare && (m.RaidDevice == nil || *m.RaidDevice != lv.fail || strings.Join(m.State, " ") != "active sync") {
					t.Errorf("the spare after the rebuild: role %v, state %v", m.RaidDevice, m.State)
				}
			}
			if got := readArray(t, sock, size); !bytes.Equal(got, data) {
				t.Errorf("the array reads back different data after the rebuild")
			}
			s.stop()
			imgs := append([]string{}, devs...)
			imgs[lv.fail] = spare
			sets = append(sets, kernelCheck{name: "rebuild-" + lv.name, imgs: imgs, md5: md5hex(data)})
		})
	}
	reAdd := []struct {
		name string
		n    int
		fail int
		opts []string
	}{
		{"raid1", 2, 1, []string{"-l1", "-n2"}},
		{"raid5", 3, 0, []string{"-l5", "-n3", "-c", "64"}},
		{"raid10", 4, 2, []string{"-l10", "-n4", "-c", "64"}},
	}
	for _, lv := range reAdd {
		t.Run("re-add-"+lv.name, func(t *testing.T) {
			md := "/dev/md/ra" + lv.name
			opts := append(lv.opts, "--assume-clean", "--bitmap=internal", "--bitmap-chunk=64K")
			devs := mkArray(t, dir, md, lv.n, memberSize, opts...)
			s := serve(t, runDir, md, devs...)
			sock := daemon.PathsFor(runDir, s.name).NBD()
			size := arraySize(t, runDir, s.name)
			data := fillRandom(t, sock, 0, size, 3)
			// A clean stop clears the bitmap: the writes below are the
			// only dirty chunks.
			s.stop()
			s = serve(t, runDir, md, devs...)
			survivor := devs[(lv.fail+1)%lv.n]
			if _, dirty := dirtyChunks(t, survivor); dirty != 0 {
				t.Fatalf("%d dirty chunks after a clean stop", dirty)
			}
			manage(t, runDir, md, "--fail", devs[lv.fail])
			manage(t, runDir, md, "--remove", devs[lv.fail])
			// Five 4 KiB writes far apart, in five 64 KiB chunks (raid
			// chunk = bitmap chunk).
			var onFailed uint64 // dirty chunks with data on the removed member
			for i := int64(0); i < 5; i++ {
				off := (size / 5 * i) / 4096 * 4096
				copy(data[off:], fillRandom(t, sock, off, 4096, uint64(10+i)))
				c := off / (64 << 10)
				// raid1/5: a bitmap chunk covers the same member range
				// on every member. raid10 (near=2, 4 members): its
				// bitmap counts array chunks; chunk c is on members 2c
				// and 2c+1 (mod 4).
				if lv.name != "raid10" || int(2*c%4) == lv.fail || int((2*c+1)%4) == lv.fail {
					onFailed++
				}
			}
			chunks, dirty := dirtyChunks(t, survivor)
			if dirty != 5 {
				t.Fatalf("%d of %d chunks dirty after five degraded 4 KiB writes to five chunks", dirty, chunks)
			}
			manage(t, runDir, md, "--re-add", devs[lv.fail])
			d := waitFor(t, runDir, md, "recover")
			want := onFailed * (64 << 10 / 512)
			if d.Sync.LastAction != "recover" || d.Sync.WrittenSectors != want {
				t.Errorf("re-add: last action %q wrote %d sectors; %d of the %d dirty bitmap chunks are on the re-added member (%d sectors)",
					d.Sync.LastAction, d.Sync.WrittenSectors, onFailed, dirty, want)
			}
			if d.ActiveDevices != lv.n || d.FailedDevices != 0 {
				t.Errorf("after the re-add: %d active, %d failed", d.ActiveDevices, d.FailedDevices)
			}
			t.Logf("re-add: %d of %d bitmap chunks dirty, %d sectors written", dirty, chunks, d.Sync.WrittenSectors)
			if got := readArray(t, sock, size); !bytes.Equal(got, data) {
				t.Errorf("the array reads back different data after the re-add")
			}
			s.stop()
			if _, dirty := dirtyChunks(t, devs[lv.fail]); dirty != 0 {
				t.Errorf("%d dirty chunks on the re-added member after a clean stop", dirty)
			}
			sets = append(sets, kernelCheck{name: "re-add-" + lv.name, imgs: devs, md5: md5hex(data)})
		})
	}
	if t.Failed() || len(sets) == 0 {
		return
	}
	kernelChecks(t, sets)
}
