package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestFailureLogLines: the lines printed when members fail are those of
// Linux 6.1's error handlers for each personality, including the failure
// beyond the redundancy (raid4/5/6: "Cannot continue operation"), the
// refused failure of the last copy (raid1/raid10) and the broken
// raid0/linear array (said once).
func TestFailureLogLines(t *testing.T) {
	cases := []struct {
		s     spec
		fail  []int
		lines [][]string // per Fail call
	}{
		{spec{level: "raid1", n: 2}, []int{0, 1}, [][]string{
			{"md/raid1:md0: Disk failure on dev0, disabling device.", "md/raid1:md0: Operation continuing on 1 devices."},
			{"md/raid1:md0: Disk failure on dev1, this is the last device.", "md/raid1:md0: Cannot continue operation (2/2 failed)."},
		}},
		{spec{level: "raid1", n: 3}, []int{2, 0}, [][]string{
			{"md/raid1:md0: Disk failure on dev2, disabling device.", "md/raid1:md0: Operation continuing on 2 devices."},
			{"md/raid1:md0: Disk failure on dev0, disabling device.", "md/raid1:md0: Operation continuing on 1 devices."},
		}},
		{spec{level: "raid10", n: 4, chunkKiB: 64}, []int{0, 3, 1}, [][]string{
			{"md/raid10:md0: Disk failure on dev0, disabling device.", "md/raid10:md0: Operation continuing on 3 devices."},
			{"md/raid10:md0: Disk failure on dev3, disabling device.", "md/raid10:md0: Operation continuing on 2 devices."},
			{"md/raid10:md0: Disk failure on dev1, this is the last device.", "md/raid10:md0: Cannot continue operation (3/4 failed)."},
		}},
		{spec{level: "raid5", n: 3, chunkKiB: 64}, []int{1, 0}, [][]string{
			{"md/raid:md0: Disk failure on dev1, disabling device.", "md/raid:md0: Operation continuing on 2 devices."},
			{"md/raid:md0: Disk failure on dev0, disabling device.", "md/raid:md0: Cannot continue operation (2/3 failed)."},
		}},
		{spec{level: "raid4", n: 3, chunkKiB: 64}, []int{2, 1}, [][]string{
			{"md/raid:md0: Disk failure on dev2, disabling device.", "md/raid:md0: Operation continuing on 2 devices."},
			{"md/raid:md0: Disk failure on dev1, disabling device.", "md/raid:md0: Cannot continue operation (2/3 failed)."},
		}},
		{spec{level: "raid6", n: 4, chunkKiB: 64}, []int{0, 1, 2}, [][]string{
			{"md/raid:md0: Disk failure on dev0, disabling device.", "md/raid:md0: Operation continuing on 3 devices."},
			{"md/raid:md0: Disk failure on dev1, disabling device.", "md/raid:md0: Operation continuing on 2 devices."},
			{"md/raid:md0: Disk failure on dev2, disabling device.", "md/raid:md0: Cannot continue operation (3/4 failed)."},
		}},
		{spec{level: "raid0", n: 2, chunkKiB: 64}, []int{1, 0}, [][]string{
			{"md/raid0md0: Disk failure on dev1 detected, failing array."},
			nil, // MD_BROKEN is already set: said once
		}},
		{spec{level: "linear", n: 2}, []int{0}, [][]string{
			{"md/linearmd0: Disk failure on dev0 detected, failing array."},
		}},
	}
	for _, c := range cases {
		t.Run(c.s.String(), func(t *testing.T) {
			mems := create(t, c.s)
			var mu sync.Mutex
			var got []string
			o := testOptions()
			o.Name = "md0"
			o.Logf = func(f string, a ...any) {
				mu.Lock()
				got = append(got, fmt.Sprintf(f, a...))
				mu.Unlock()
			}
			a := open(t, mems, o)
			defer a.Close()
			for i, role := range c.fail {
				mu.Lock()
				got = nil
				mu.Unlock()
				if err := a.Fail(role); err != nil {
					t.Fatalf("fail %d: %v", role, err)
				}
				mu.Lock()
				lines := got
				mu.Unlock()
				if strings.Join(lines, "\n") != strings.Join(c.lines[i], "\n") {
					t.Errorf("fail role %d: log\n%s\nwant\n%s", role, strings.Join(lines, "\n"), strings.Join(c.lines[i], "\n"))
				}
			}
		})
	}
}

// TestReadErrorLogLines: a repaired read error prints the kernel's lines:
// raid1/raid10 name the mirror the read was redirected to, and every
// personality says "read error corrected" with the member's sector
// (data offset included) and name.
func TestReadErrorLogLines(t *testing.T) {
	for _, c := range []struct {
		s     spec
		lines []string // %d: the data offset of dev0 in sectors
	}{
		{spec{level: "raid1", n: 2}, []string{
			"md/raid1:md0: redirecting sector 0 to other mirror: dev1",
			"md/raid1:md0: read error corrected (8 sectors at %d on dev0)"}},
		{spec{level: "raid10", n: 4, chunkKiB: 64}, []string{
			"md/raid10:md0: dev1: redirecting sector 0 to another mirror",
			"md/raid10:md0: read error corrected (8 sectors at %d on dev0)"}},
		{spec{level: "raid5", n: 3, chunkKiB: 64}, []string{
			"md/raid:md0: read error corrected (8 sectors at %d on dev0)"}},
	} {
		t.Run(c.s.String(), func(t *testing.T) {
			mems := create(t, c.s)
			devs := devices(mems)
			fd := NewFaultDevice(devs[0], 1)
			devs[0] = fd
			var mu sync.Mutex
			var got []string
			o := testOptions()
			o.Name = "md0"
			o.Logf = func(f string, a ...any) {
				mu.Lock()
				got = append(got, fmt.Sprintf(f, a...))
				mu.Unlock()
			}
			a, err := Open(devs, o)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			dataOff := a.roles[0].dataOff
			fd.AddRule(FaultRule{Ops: OpRead, Off: dataOff, Len: 4096, HealOnWrite: true})
			if _, err := a.ReadAt(make([]byte, 4096), 0); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, l := range c.lines {
				if strings.Contains(l, "%d") {
					l = fmt.Sprintf(l, dataOff>>9)
				}
				want = append(want, l)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
