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
