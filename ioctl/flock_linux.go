//go:build linux

package ioctl

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// An image file's exclusive lock is a flock, which belongs to the open
// file description, not to the process. A child this process forks
// (os/exec: qemu, losetup, mdadm's helpers, a monitor's program) gets a
// copy of every descriptor, and O_CLOEXEC drops that copy only when the
// child's exec has completed. Until then the copy keeps the lock of a
// descriptor this process may already have closed: an `mdtool create`
// followed by an assemble in the same process (the test binary runs
// many at once) found its own fresh members "busy". Such a lock is not a
// user of the member: flockMember waits for it to go (inheritedLockWait
// at most), and only for it.

// inheritedLockWait bounds the wait for a lock only an exec in progress
// still holds: far longer than an exec takes on a loaded machine.
const inheritedLockWait = 10 * time.Second

// flockMember takes flock(LOCK_EX|LOCK_NB) on fd, the open image file st
// describes. It returns unix.EWOULDBLOCK when another open file
// description holds the lock, unless lockOnlyInherited says that lock
// can only be a forked child's copy between fork and exec: then it tries
// again until the copy is gone or inheritedLockWait has passed.
func flockMember(fd int, st *unix.Stat_t) error {
	var deadline time.Time
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == unix.EINTR:
			continue
		case err != unix.EWOULDBLOCK:
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(inheritedLockWait)
		}
		if !time.Now().Before(deadline) || !lockOnlyInherited(fd, st) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lockOnlyInherited reports whether the flock on st's file can only be a
// forked child's copy of a descriptor this process has closed: every
// FLOCK lock /proc/locks lists on the file was taken by this process
// (/proc/locks names the process that took a flock, not the ones holding
// copies of its descriptor), or none is left (the copy has just gone),
// and no descriptor of this process other than self refers to the file.
func lockOnlyInherited(self int, st *unix.Stat_t) bool {
	pids, ok := flockTakers(st.Ino)
	if !ok {
		return false
	}
	for _, p := range pids {
		if p != os.Getpid() {
			return false
		}
	}
	return !openElsewhere(self, st)
}

// flockTakers lists the processes that took the FLOCK locks /proc/locks
// shows on inode ino (ok false when it cannot be read).
func flockTakers(ino uint64) (pids []int, ok bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	want := strconv.FormatUint(ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 14713 fe:00:10126269 0 EOF";
		// a blocked waiter's line has "->" after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		id := fields[5]
		if i := strings.LastIndexByte(id, ':'); i < 0 || id[i+1:] != want {
			continue
		}
		p, err := strconv.Atoi(fields[4])
		if err != nil {
			return nil, false
		}
		pids = append(pids, p)
	}
	return pids, sc.Err() == nil
}

// openElsewhere reports whether a descriptor of this process other than
// self refers to st's file (same device and inode).
func openElsewhere(self int, st *unix.Stat_t) bool {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return true // cannot tell: the lock counts
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == self {
			continue
		}
		var o unix.Stat_t
		if unix.Fstat(n, &o) == nil && o.Dev == st.Dev && o.Ino == st.Ino {
			return true
		}
	}
	return false
}
