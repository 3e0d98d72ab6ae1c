package membermodel

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sleep blocks the calling goroutine for d. time.Sleep is far too coarse
// for request times of a few hundred microseconds: when the process is
// otherwise idle the runtime's poller waits in whole milliseconds. A
// nanosleep would be precise but would hold its P (GOMAXPROCS slot) while
// it sleeps, so that a few sleeping members stall the engine. A timerfd
// read through the runtime's poller is both: the goroutine parks, and the
// poller wakes it when the timer fires (a few µs late).
func sleep(d time.Duration) {
	t, _ := timers.Get().(*timerFD)
	if t == nil {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			time.Sleep(d)
			return
		}
		t = &timerFD{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	var b [8]byte
	if unix.TimerfdSettime(t.fd, 0, &spec, nil) != nil {
		time.Sleep(d)
	} else if _, err := t.f.Read(b[:]); err != nil {
		time.Sleep(d)
	}
	timers.Put(t)
}

type timerFD struct {
	f  *os.File // keeps fd open and registered with the poller
	fd int
}

var timers sync.Pool
