//go:build linux

package ublkexport

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"mdtool/ioctl"
)

// evTag is the user data of the eventfd read in a queue's ring (tags are
// below 4096).
const evTag = 1 << 63

// eventOne is the 8-byte eventfd increment the workers write.
var eventOne = [8]byte{1}

type completion struct {
	tag uint16
	res int32
}

// queue is one hardware queue: its ring goroutine and its workers.
type queue struct {
	d     *Device
	qid   int
	depth int
	maxIO int
	uq    *ioctl.UblkQueue
	mem   []byte // depth buffers of maxIO bytes, then the eventfd's 8 bytes
	efd   int
	work  chan uint16
	mu    sync.Mutex
	done  []completion // results the ring has not committed yet
	spare []completion
	dead  atomic.Bool // kill: end the loop
	wg    sync.WaitGroup
}

func newQueue(d *Device, qid, depth int, maxIO uint32) *queue {
	return &queue{d: d, qid: qid, depth: depth, maxIO: int(maxIO), efd: -1,
		work: make(chan uint16, depth), done: make([]completion, 0, depth), spare: make([]completion, 0, depth)}
}

func (q *queue) buf(tag uint16) []byte {
	off := int(tag) * q.maxIO
	return q.mem[off : off+q.maxIO : off+q.maxIO]
}

func (q *queue) bufAddr(tag uint16) uintptr {
	return uintptr(unsafe.Pointer(&q.mem[int(tag)*q.maxIO]))
}

func (q *queue) evBuf() unsafe.Pointer { return unsafe.Pointer(&q.mem[q.depth*q.maxIO]) }

// kill ends the ring loop from outside (a start that failed).
func (q *queue) kill() {
	q.dead.Store(true)
	if q.efd >= 0 {
		unix.Write(q.efd, eventOne[:])
	}
}

// setup maps the buffers, opens the queue and fetches every tag. It runs
// on the queue's locked thread.
func (q *queue) setup() error {
	var err error
	page := os.Getpagesize()
	q.mem, err = unix.Mmap(-1, 0, q.depth*q.maxIO+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("ublk: queue %d buffers: %w", q.qid, err)
	}
	if q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("ublk: eventfd: %w", err)
	}
	q.uq, err = ioctl.OpenUblkQueue(ioctl.UblkQueueOptions{CharFD: int(q.d.cdev.Fd()), QID: q.qid,
		Depth: q.depth, Legacy: q.d.ctrl.Legacy(), Extra: 1,
		RingFlags: ioctl.RingCoopTaskrun | ioctl.RingSingleIssuer | ioctl.RingDeferTaskrun})
	if err != nil {
		return err
	}
	for t := 0; t < q.depth; t++ {
		if err := q.uq.PrepFetch(uint16(t), q.bufAddr(uint16(t))); err != nil {
			return err
		}
	}
	if err := q.uq.Ring.PrepRead(q.efd, q.evBuf(), 8, 0, evTag); err != nil {
		return err
	}
	_, err = q.uq.Ring.Submit(0)
	return err
}

func (q *queue) teardown() {
	close(q.work)
	q.wg.Wait()
	if q.uq != nil {
		q.uq.Close()
	}
	if q.efd >= 0 {
		unix.Close(q.efd)
	}
	if q.mem != nil {
		unix.Munmap(q.mem)
	}
}

// run is the queue's ring goroutine. It reports on ready once its tags
// are fetched (or setup failed), then serves until every tag is aborted
// (STOP_DEV) or the queue is killed.
func (q *queue) run(ready chan<- error) {
	defer q.d.wg.Done()
	// The thread stays locked: when this goroutine ends the thread ends,
	// which is what the driver expects of a queue daemon going away.
	runtime.LockOSThread()
	if err := q.setup(); err != nil {
		q.teardown()
		ready <- err
		return
	}
	for i := 0; i < q.depth; i++ {
		q.wg.Add(1)
		go q.worker()
	}
	ready <- nil
	if err := q.loop(); err != nil {
		q.d.fail(err)
	}
	q.teardown()
}

func (q *queue) loop() error {
	r := q.uq.Ring
	aborted := 0
	for {
		rearm := false
		for {
			c, ok := r.PeekCQE()
			if !ok {
				break
			}
			r.SeenCQE()
			switch {
			case c.UserData == evTag:
				rearm = true
			case c.Res == 0: // UBLK_IO_RES_OK: a request for this tag
				q.work <- uint16(c.UserData)
			case c.Res == ioctl.UblkResAbort:
				aborted++
			default:
				aborted++
				q.d.fail(fmt.Errorf("ublk: queue %d tag %d: %w", q.qid, c.UserData, unix.Errno(-c.Res)))
			}
		}
		q.mu.Lock()
		list := q.done
		q.done = q.spare[:0]
		q.mu.Unlock()
		for _, c := range list {
			if err := q.uq.PrepCommitAndFetch(c.tag, c.res, q.bufAddr(c.tag)); err != nil {
				return err
			}
		}
		q.spare = list
		if aborted >= q.depth || q.dead.Load() {
			return nil
		}
		if rearm {
			if err := r.PrepRead(q.efd, q.evBuf(), 8, 0, evTag); err != nil {
				return err
			}
		}
		if _, err := r.Submit(1); err != nil {
			return err
		}
	}
}

func (q *queue) worker() {
	defer q.wg.Done()
	for tag := range q.work {
		res := q.serve(q.uq.Desc(tag), q.buf(tag))
		q.mu.Lock()
		wake := len(q.done) == 0
		q.done = append(q.done, completion{tag: tag, res: res})
		q.mu.Unlock()
		if wake {
			unix.Write(q.efd, eventOne[:])
		}
	}
}

// serve runs one request on the Backend: bytes done, or a negative errno.
func (q *queue) serve(desc ioctl.UblkIODesc, buf []byte) int32 {
	b := q.d.b
	off := int64(desc.StartSector) << 9
	n := int64(desc.NrSectors) << 9
	var err error
	switch desc.Op() {
	case ioctl.UblkOpRead, ioctl.UblkOpWrite:
		if n > int64(len(buf)) {
			return -int32(unix.EINVAL)
		}
		p := buf[:n]
		var done int
		switch {
		case desc.Op() == ioctl.UblkOpRead:
			done, err = b.ReadAt(p, off)
		case desc.OpFlags&ioctl.UblkIOFlagFUA != 0:
			done, err = b.WriteAtFUA(p, off)
		default:
			done, err = b.WriteAt(p, off)
		}
		if err == nil || done == len(p) {
			return int32(done)
		}
	case ioctl.UblkOpFlush:
		err = b.Flush()
	case ioctl.UblkOpDiscard:
		err = b.Discard(off, n)
	case ioctl.UblkOpWriteZeroes:
		err = b.WriteZeroes(off, n, desc.OpFlags&ioctl.UblkIOFlagNoUnmap == 0)
	default:
		return -int32(unix.EOPNOTSUPP)
	}
	if err == nil {
		return 0
	}
	return -int32(errno(err))
}

// errno maps a Backend error to the errno the block layer gets.
func errno(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
		switch e {
		case unix.ENOSPC, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOMEM, unix.EPERM, unix.EROFS:
			return e
		}
	}
	return unix.EIO
}
