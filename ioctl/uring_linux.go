//go:build linux

package ioctl

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring: what the ublk driver needs (URING_CMD on the ublk
// control and queue devices, a READ of an eventfd to wake the queue's
// thread). The layout constants are Linux's include/uapi/linux/io_uring.h.

// RingFlags are io_uring_setup flags.
type RingFlags uint32

const (
	// RingSQE128 makes every SQE 128 bytes: the ublk control device wants
	// its 32-byte command in the SQE's 80-byte command area.
	RingSQE128 RingFlags = 1 << 10
	// RingCoopTaskrun, RingSingleIssuer and RingDeferTaskrun (together,
	// Linux 6.1+) run completion work only when the one submitting thread
	// waits for completions, instead of interrupting it.
	RingCoopTaskrun  RingFlags = 1 << 8
	RingSingleIssuer RingFlags = 1 << 12
	RingDeferTaskrun RingFlags = 1 << 13
)

const (
	ioringOpRead     = 22
	ioringOpURingCmd = 46

	ioringEnterGetEvents = 1 << 0

	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringFeatSingleMmap = 1 << 0

	sqeSize    = 64
	cqeSize    = 16
	sqeCmdOff  = 48 // the URING_CMD command area
	sqeCmdSize = 16 // in a 64-byte SQE; 80 in a 128-byte one
)

// ringParams is struct io_uring_params (120 bytes).
type ringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqRingOffsets
	cqOff                                                                  cqRingOffsets
}

type sqRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// CQE is a completion: the submission's user data and its result (a
// negative errno on failure).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Ring is one io_uring instance. It is not safe for concurrent use: one
// goroutine (for ublk queues: one OS thread) submits and reaps.
type Ring struct {
	fd      int
	sqeLen  int
	sqRing  []byte
	cqRing  []byte
	sqes    []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqN     uint32
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqesOff uint32
	tail    uint32 // local SQ tail (entries prepared)
	toSend  uint32 // prepared, not yet submitted
}

// ErrRingFull is returned when no SQE is free until Submit.
var ErrRingFull = errors.New("io_uring: submission queue full")

// NewRing sets up an io_uring with at least entries submission entries.
func NewRing(entries uint32, flags RingFlags) (*Ring, error) {
	var p ringParams
	p.flags = uint32(flags)
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), sqeLen: sqeSize}
	if flags&RingSQE128 != 0 {
		r.sqeLen = 2 * sqeSize
	}
	if err := r.mmap(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap(p *ringParams) error {
	sqLen := int(p.sqOff.array + p.sqEntries*4)
	cqLen := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	single := p.features&ioringFeatSingleMmap != 0
	if single && cqLen > sqLen {
		sqLen = cqLen
	}
	var err error
	r.sqRing, err = unix.Mmap(r.fd, ioringOffSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: mmap SQ ring: %w", err)
	}
	r.cqRing = r.sqRing
	if !single {
		if r.cqRing, err = unix.Mmap(r.fd, ioringOffCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			r.cqRing = nil
			return fmt.Errorf("io_uring: mmap CQ ring: %w", err)
		}
	}
	if r.sqes, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries)*r.sqeLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.sqes = nil
		return fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail = u32(r.sqRing, p.sqOff.head), u32(r.sqRing, p.sqOff.tail)
	r.sqMask, r.sqN = *u32(r.sqRing, p.sqOff.ringMask), p.sqEntries
	r.cqHead, r.cqTail = u32(r.cqRing, p.cqOff.head), u32(r.cqRing, p.cqOff.tail)
	r.cqMask, r.cqesOff = *u32(r.cqRing, p.cqOff.ringMask), p.cqOff.cqes
	// SQ array: slot i always holds SQE i.
	for i := uint32(0); i < p.sqEntries; i++ {
		*u32(r.sqRing, p.sqOff.array+4*i) = i
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

// Close releases the ring (the kernel cancels what is still pending).
func (r *Ring) Close() error {
	if r.sqes != nil {
		unix.Munmap(r.sqes)
	}
	if r.cqRing != nil && (r.sqRing == nil || &r.cqRing[0] != &r.sqRing[0]) {
		unix.Munmap(r.cqRing)
	}
	if r.sqRing != nil {
		unix.Munmap(r.sqRing)
	}
	r.sqes, r.cqRing, r.sqRing = nil, nil, nil
	if r.fd >= 0 {
		err := unix.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}

// FD is the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// nextSQE returns the next free SQE, zeroed, or nil when the ring is full.
func (r *Ring) nextSQE() []byte {
	if r.tail-atomic.LoadUint32(r.sqHead) >= r.sqN {
		return nil
	}
	off := int(r.tail&r.sqMask) * r.sqeLen
	sqe := r.sqes[off : off+r.sqeLen : off+r.sqeLen]
	clear(sqe)
	r.tail++
	r.toSend++
	return sqe
}

// PrepURingCmd queues an IORING_OP_URING_CMD for fd and returns its
// command area (16 bytes, 80 with RingSQE128) to fill in.
func (r *Ring) PrepURingCmd(fd int, cmdOp uint32, userData uint64) ([]byte, error) {
	sqe := r.nextSQE()
	if sqe == nil {
		return nil, ErrRingFull
	}
	sqe[0] = ioringOpURingCmd
	putU32(sqe[4:], uint32(int32(fd)))
	putU32(sqe[8:], cmdOp)
	putU64(sqe[32:], userData)
	return sqe[sqeCmdOff:], nil
}

// PrepRead queues an IORING_OP_READ of n bytes at buf (memory that must
// stay valid and unmoved until the completion: mmap'd or otherwise
// pinned).
func (r *Ring) PrepRead(fd int, buf unsafe.Pointer, n uint32, off uint64, userData uint64) error {
	sqe := r.nextSQE()
	if sqe == nil {
		return ErrRingFull
	}
	sqe[0] = ioringOpRead
	putU32(sqe[4:], uint32(int32(fd)))
	putU64(sqe[8:], off)
	putU64(sqe[16:], uint64(uintptr(buf)))
	putU32(sqe[24:], n)
	putU64(sqe[32:], userData)
	return nil
}

// Submit hands the prepared SQEs to the kernel and, with wait > 0, waits
// until at least wait completions are ready. EINTR is retried.
func (r *Ring) Submit(wait uint32) (int, error) {
	atomic.StoreUint32(r.sqTail, r.tail)
	var flags uintptr
	if wait > 0 {
		flags = ioringEnterGetEvents
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.toSend), uintptr(wait), flags, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("io_uring_enter: %w", errno)
		}
		if uint32(n) >= r.toSend {
			r.toSend = 0
		} else {
			r.toSend -= uint32(n)
		}
		return int(n), nil
	}
}

// PeekCQE returns the oldest completion without consuming it.
func (r *Ring) PeekCQE() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	off := r.cqesOff + (head&r.cqMask)*cqeSize
	c := r.cqRing[off : off+cqeSize]
	return CQE{UserData: getU64(c), Res: int32(getU32(c[8:])), Flags: getU32(c[12:])}, true
}

// SeenCQE consumes the oldest completion.
func (r *Ring) SeenCQE() { atomic.AddUint32(r.cqHead, 1) }

func putU32(b []byte, v uint32) { *(*uint32)(unsafe.Pointer(&b[0])) = v }
func putU64(b []byte, v uint64) { *(*uint64)(unsafe.Pointer(&b[0])) = v }
func getU32(b []byte) uint32    { return *(*uint32)(unsafe.Pointer(&b[0])) }
func getU64(b []byte) uint64    { return *(*uint64)(unsafe.Pointer(&b[0])) }
