package mdvm

import (
	"context"
	"os"
	"strconv"
	"sync"
)

// Guests at once. A test binary runs at most Jobs() VMs at a time: the
// machines have two cores, a TCG guest mostly keeps one of them busy, and
// while one test's guest runs another test's host side (or guest) can use
// the other core. Kernel tests that may overlap opt in with Parallel(t).

// JobsEnv names the variable that sets how many guests one test binary
// runs at once.
const JobsEnv = "MDTOOL_VM_JOBS"

// Jobs is $MDTOOL_VM_JOBS when it is a positive number, else 2 under CI
// (CI set: a machine of its own), else 1 (a shared developer machine: VM
// runs stay one after another). Two at once cut CI's wall time; the two
// "busy" failures a fresh-clone run with two once met were a forked
// child's copy of an image file's flock (ioctl/flock_linux.go) and an NBD
// client that had hung up still counted by -o (internal/daemon/nbdconns.go).
func Jobs() int {
	if n, err := strconv.Atoi(os.Getenv(JobsEnv)); err == nil && n > 0 {
		return n
	}
	if os.Getenv("CI") != "" {
		return 2
	}
	return 1
}

// slotPool is a counting semaphore of guest slots.
type slotPool chan struct{}

// acquire waits for a free slot (or ctx's end); release gives it back.
func (p slotPool) acquire(ctx context.Context) (release func(), err error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	select {
	case p <- struct{}{}:
		return func() { <-p }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var (
	slotsOnce sync.Once
	slots     slotPool
)

// acquireSlot takes one of the test binary's Jobs() guest slots.
func acquireSlot(ctx context.Context) (release func(), err error) {
	slotsOnce.Do(func() { slots = make(slotPool, Jobs()) })
	return slots.acquire(ctx)
}

// Parallel marks a kernel VM test that may run beside the package's other
// Parallel tests (t.Parallel); its VM runs still take a guest slot each.
// Call it first in the test, only when the test shares no host state with
// other tests: no fixed paths, device names, loop devices, mount points,
// ports, run dirs or package variables it writes, no os.Setenv, t.Setenv
// or os.Chdir (DEVELOPERS.md, "The kernel oracle").
// With Jobs() == 1 the test stays serial.
func Parallel(t interface{ Parallel() }) {
	if Jobs() > 1 {
		t.Parallel()
	}
}
