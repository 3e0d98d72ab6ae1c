package engine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fileMembers writes the members of a fresh array s to image files.
func fileMembers(t *testing.T, s spec) []string {
	t.Helper()
	mems := create(t, s)
	dir := t.TempDir()
	var paths []string
	for i, m := range mems {
		b := make([]byte, s.devSize(i))
		if _, err := m.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("m%d.img", i))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestTruncatedMemberFails: a member file truncated while the engine
// serves it is failed (faulty, events bumped in the others' superblocks,
// array degraded) on the first read or write that reaches past its new
// end, instead of being "repaired" by rewrites that extend the file
// again; the array keeps serving the right data from the others and the
// truncated file keeps its size.
func TestTruncatedMemberFails(t *testing.T) {
	specs := []spec{
		{level: "raid1", n: 2},
		{level: "raid5", n: 3, chunkKiB: 64},
		{level: "raid6", n: 4, chunkKiB: 64},
		{level: "raid10", n: 4, chunkKiB: 64},
		{level: "raid1", n: 2, bitmap: true},
	}
	for _, s := range specs {
		for _, first := range []string{"read", "write"} {
			t.Run(s.String()+"-"+first, func(t *testing.T) {
				paths := fileMembers(t, s)
				var devs []Device
				for _, p := range paths {
					d, err := OpenFile(p, FileOptions{})
					if err != nil {
						t.Fatal(err)
					}
					devs = append(devs, d)
				}
				var mu sync.Mutex
				var logs []string
				o := testOptions()
				o.Name = "md0"
				o.Logf = func(f string, a ...any) {
					mu.Lock()
					logs = append(logs, fmt.Sprintf(f, a...))
					mu.Unlock()
				}
				a, err := Open(devs, o)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				m := newModel(a.Size())
				workload(t, a, m, 7, 50)
				checkContent(t, a, m)
				ev := a.Events()

				const victim = 1
				if err := os.Truncate(paths[victim], 1<<20); err != nil {
					t.Fatal(err)
				}
				if first == "write" {
					workload(t, a, m, 8, 50)
				}
				checkContent(t, a, m)
				workload(t, a, m, 9, 50)
				checkContent(t, a, m)

				st := Missing
				for _, mi := range a.Members() {
					if mi.Device == victim {
						st = mi.State
					}
				}
				if st != Faulty {
					t.Errorf("truncated member: state %v, want faulty", st)
				}
				if a.Degraded() != 1 {
					t.Errorf("degraded %d, want 1", a.Degraded())
				}
				if a.Events() <= ev {
					t.Errorf("events %d, not bumped from %d", a.Events(), ev)
				}
				if got := fileSize(t, paths[victim]); got != 1<<20 {
					t.Errorf("truncated member re-extended to %d bytes", got)
				}
				mu.Lock()
				log := strings.Join(logs, "\n")
				mu.Unlock()
				if !strings.Contains(log, "Disk failure on m1.img, disabling device.") {
					t.Errorf("log has no failure of m1.img:\n%s", log)
				}
				if strings.Contains(log, "read error corrected") {
					t.Errorf("the truncated member was patched:\n%s", log)
				}
				if err := a.Close(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("close: %v", err)
				}
				if got := fileSize(t, paths[victim]); got != 1<<20 {
					t.Errorf("after close: truncated member re-extended to %d bytes", got)
				}
				// The others' superblocks record the failure: the array
				// assembles degraded without the truncated member.
				var rest []Device
				for i, p := range paths {
					if i == victim {
						continue
					}
					d, err := OpenFile(p, FileOptions{ReadOnly: true})
					if err != nil {
						t.Fatal(err)
					}
					rest = append(rest, d)
				}
				ro := testOptions()
				ro.ReadOnly = true
				b, err := Open(rest, ro)
				if err != nil {
					t.Fatalf("reassemble without the truncated member: %v", err)
				}
				defer b.Close()
				if b.Events() <= ev {
					t.Errorf("superblock events %d, not bumped from %d", b.Events(), ev)
				}
				checkContent(t, b, m)
			})
		}
	}
}

// TestShrunkBlockMemberFails: the same with a block device that shrinks
// while served (a loop device whose backing file is truncated and whose
// capacity is refreshed): reads at its end return nothing, writes past it
// fail with ENOSPC; the member fails and the array serves the data.
func TestShrunkBlockMemberFails(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64}
	loops := loopImages(t, s, 512)
	var devs []Device
	for i, p := range loops {
		if i == 1 {
			// opened through a symlink: the log names the kernel device
			link := filepath.Join(t.TempDir(), "by-id-member1")
			if err := os.Symlink(p, link); err != nil {
				t.Fatal(err)
			}
			p = link
		}
		d, err := OpenFile(p, FileOptions{Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	var mu sync.Mutex
	var logs []string
	o := testOptions()
	o.Name = "md0"
	o.Logf = func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	a, err := Open(devs, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := newModel(a.Size())
	workload(t, a, m, 7, 50)
	out, err := exec.Command("losetup", "-n", "-O", "BACK-FILE", loops[1]).Output()
	if err != nil {
		t.Fatalf("losetup: %v", err)
	}
	backing := strings.TrimSpace(string(out))
	if err := os.Truncate(backing, 1<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "-c", loops[1]).CombinedOutput(); err != nil {
		t.Fatalf("losetup -c: %v %s", err, out)
	}
	if size, err := devs[1].(*FileDevice).CurrentSize(); err != nil || size != 1<<20 {
		t.Fatalf("loop device size %d, %v after the shrink", size, err)
	}
	checkContent(t, a, m)
	workload(t, a, m, 9, 50)
	checkContent(t, a, m)
	for _, mi := range a.Members() {
		if mi.Device == 1 && mi.State != Faulty {
			t.Errorf("shrunk member: state %v, want faulty", mi.State)
		}
	}
	if a.Degraded() != 1 {
		t.Errorf("degraded %d, want 1", a.Degraded())
	}
	mu.Lock()
	log := strings.Join(logs, "\n")
	mu.Unlock()
	want := "md/raid:md0: Disk failure on " + filepath.Base(loops[1]) + ", disabling device.\nmd/raid:md0: Operation continuing on 2 devices."
	if !strings.Contains(log, want) || strings.Contains(log, "read error corrected") {
		t.Errorf("log:\n%s\nwant the failure of %s and no corrections", log, loops[1])
	}
}
