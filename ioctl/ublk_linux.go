//go:build linux

package ioctl

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ublk driver's interface (Linux's include/uapi/linux/ublk_cmd.h and
// drivers/block/ublk_drv.c, 6.12): control commands as URING_CMDs on
// /dev/ublk-control with 128-byte SQEs, and per queue FETCH_REQ /
// COMMIT_AND_FETCH_REQ URING_CMDs on /dev/ublkcN, with the request
// descriptors in a read-only mmap of /dev/ublkcN.

// UblkControlPath is the ublk driver's control device.
const UblkControlPath = "/dev/ublk-control"

// Control command numbers (the _IOC_NR of the ioctl-encoded UBLK_U_CMD_*).
const (
	ublkCmdGetDevInfo     = 0x02
	ublkCmdAddDev         = 0x04
	ublkCmdDelDev         = 0x05
	ublkCmdStartDev       = 0x06
	ublkCmdStopDev        = 0x07
	ublkCmdSetParams      = 0x08
	ublkCmdGetParams      = 0x09
	ublkCmdStartRecovery  = 0x10
	ublkCmdEndRecovery    = 0x11
	ublkCmdGetFeatures    = 0x13
	ublkIOFetchReq        = 0x20
	ublkIOCommitAndFetch  = 0x21
	ublkCtrlCmdSize       = 32 // struct ublksrv_ctrl_cmd
	ublkIOCmdSize         = 16 // struct ublksrv_io_cmd
	ublkIODescSize        = 24 // struct ublksrv_io_desc
	ublkMaxQueueDepth     = 4096
	ublkCmdBufOffset      = 0
	iocRead, iocReadWrite = 2, 3
)

// ublk device flags (UBLK_F_*).
const (
	UblkFUserRecovery        uint64 = 1 << 3
	UblkFUserRecoveryReissue uint64 = 1 << 4
	UblkFCmdIoctlEncode      uint64 = 1 << 6
)

// ublk device states (UBLK_S_DEV_*).
const (
	UblkStateDead     = 0
	UblkStateLive     = 1
	UblkStateQuiesced = 2
)

// I/O operations in a descriptor (UBLK_IO_OP_*) and their flags.
const (
	UblkOpRead        = 0
	UblkOpWrite       = 1
	UblkOpFlush       = 2
	UblkOpDiscard     = 3
	UblkOpWriteSame   = 4
	UblkOpWriteZeroes = 5

	UblkIOFlagFUA     = 1 << 13
	UblkIOFlagNoUnmap = 1 << 15
)

// UblkResAbort is the result of a queue command the driver completes
// without a request: the device is stopping (or the queue is being torn
// down); the tag must not be fetched again.
const UblkResAbort = -int32(unix.ENODEV)

// Parameter types and attributes (UBLK_PARAM_TYPE_*, UBLK_ATTR_*).
const (
	UblkParamTypeBasic   = 1 << 0
	UblkParamTypeDiscard = 1 << 1
	UblkParamTypeDevt    = 1 << 2

	UblkAttrReadOnly      = 1 << 0
	UblkAttrRotational    = 1 << 1
	UblkAttrVolatileCache = 1 << 2
	UblkAttrFUA           = 1 << 3
)

// UblkDevInfo is struct ublksrv_ctrl_dev_info (64 bytes).
type UblkDevInfo struct {
	NrHWQueues    uint16
	QueueDepth    uint16
	State         uint16
	_             uint16
	MaxIOBufBytes uint32
	DevID         uint32
	SrvPID        int32
	_             uint32
	Flags         uint64
	SrvFlags      uint64
	OwnerUID      uint32
	OwnerGID      uint32
	_             [2]uint64
}

// UblkParamBasic is struct ublk_param_basic (32 bytes). The block sizes
// and I/O hints are shifts: every one of them is a power of two.
type UblkParamBasic struct {
	Attrs            uint32
	LogicalBSShift   uint8
	PhysicalBSShift  uint8
	IOOptShift       uint8
	IOMinShift       uint8
	MaxSectors       uint32
	ChunkSectors     uint32
	DevSectors       uint64
	VirtBoundaryMask uint64
}

// UblkParamDiscard is struct ublk_param_discard (20 bytes).
type UblkParamDiscard struct {
	DiscardAlignment      uint32
	DiscardGranularity    uint32
	MaxDiscardSectors     uint32
	MaxWriteZeroesSectors uint32
	MaxDiscardSegments    uint16
	_                     uint16
}

// UblkParamDevt is struct ublk_param_devt (read-only, from GET_PARAMS).
type UblkParamDevt struct {
	CharMajor, CharMinor, DiskMajor, DiskMinor uint32
}

// UblkParams is struct ublk_params up to the zoned parameters (112 bytes
// as in 6.12).
type UblkParams struct {
	Len     uint32
	Types   uint32
	Basic   UblkParamBasic
	Discard UblkParamDiscard
	Devt    UblkParamDevt
	_       [32]byte // struct ublk_param_zoned
}

// UblkIODesc is one request descriptor (struct ublksrv_io_desc).
type UblkIODesc struct {
	OpFlags     uint32
	NrSectors   uint32
	StartSector uint64
	Addr        uint64
}

// Op is the descriptor's operation (UblkOp*).
func (d UblkIODesc) Op() uint8 { return uint8(d.OpFlags) }

// ioc builds an ioctl number as the kernel's _IOC for type 'u'.
func ioc(dir, nr, size uint32) uint32 { return dir<<30 | size<<16 | uint32('u')<<8 | nr }

// UblkError is a failed ublk command: which command and the errno.
type UblkError struct {
	Cmd   string
	DevID int
	Errno unix.Errno
}

func (e *UblkError) Error() string {
	if e.DevID < 0 {
		return fmt.Sprintf("ublk %s: %v", e.Cmd, e.Errno)
	}
	return fmt.Sprintf("ublk %s (device %d): %v", e.Cmd, e.DevID, e.Errno)
}

// Unwrap makes errors.Is(err, unix.EBUSY) and the like work.
func (e *UblkError) Unwrap() error { return e.Errno }

// UblkControl is an open /dev/ublk-control with its own io_uring. Its
// methods are safe for concurrent use (commands are serialised).
type UblkControl struct {
	mu       sync.Mutex
	f        *os.File
	ring     *Ring
	legacy   bool   // the kernel predates ioctl-encoded commands (6.1)
	features uint64 // from GET_FEATURES; 0 on kernels without it
	scratch  *ublkScratch
}

// ublkScratch is the heap memory the control commands point the kernel at.
type ublkScratch struct {
	info     UblkDevInfo
	params   UblkParams
	features uint64
}

// OpenUblkControl opens the control device and asks the driver for its
// features (UBLK_U_CMD_GET_FEATURES, Linux 6.5 and later; older kernels
// answer with an error and get the legacy command numbers).
func OpenUblkControl() (*UblkControl, error) {
	f, err := os.OpenFile(UblkControlPath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	r, err := NewRing(4, RingSQE128)
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &UblkControl{f: f, ring: r, scratch: new(ublkScratch)}
	c.mu.Lock()
	err = c.cmd("GET_FEATURES", ublkCmdGetFeatures, iocRead, -1, unsafe.Pointer(&c.scratch.features), 8, 0)
	if err != nil {
		c.legacy = true
	} else {
		c.features = c.scratch.features
	}
	c.mu.Unlock()
	return c, nil
}

// Close closes the control device.
func (c *UblkControl) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring.Close()
	return c.f.Close()
}

// Features is the driver's UBLK_F_* set (0 when it cannot say: before 6.5).
func (c *UblkControl) Features() uint64 { return c.features }

// cmd runs one control command and waits for it. The caller holds c.mu;
// buf points into c.scratch (heap memory the kernel may use while the
// command runs in its worker).
func (c *UblkControl) cmd(name string, nr, dir uint32, devID int, buf unsafe.Pointer, n uint16, data uint64) error {
	op := ioc(dir, nr, ublkCtrlCmdSize)
	if c.legacy {
		op = nr
	}
	cmd, err := c.ring.PrepURingCmd(int(c.f.Fd()), op, uint64(nr))
	if err != nil {
		return err
	}
	id := uint32(devID)
	putU32(cmd[0:], id)
	*(*uint16)(unsafe.Pointer(&cmd[4])) = 0xffff // queue_id: not a queue command
	*(*uint16)(unsafe.Pointer(&cmd[6])) = n
	putU64(cmd[8:], uint64(uintptr(buf)))
	putU64(cmd[16:], data)
	if _, err := c.ring.Submit(1); err != nil {
		return err
	}
	var cqe CQE
	for {
		var ok bool
		if cqe, ok = c.ring.PeekCQE(); ok {
			c.ring.SeenCQE()
			break
		}
		if _, err := c.ring.Submit(1); err != nil {
			return err
		}
	}
	runtime.KeepAlive(c.scratch)
	if cqe.Res < 0 {
		return &UblkError{Cmd: name, DevID: devID, Errno: unix.Errno(-cqe.Res)}
	}
	return nil
}

// AddDev creates a ublk device (ADD_DEV): info says the queues, their
// depth, the largest request, the wanted device id (^0: any) and flags.
// It returns the driver's version of info: the device id, the flags it
// accepted and the queue count clamped to the CPUs.
func (c *UblkControl) AddDev(info UblkDevInfo) (UblkDevInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scratch.info = info
	id := int(int32(info.DevID))
	err := c.cmd("ADD_DEV", ublkCmdAddDev, iocReadWrite, id, unsafe.Pointer(&c.scratch.info), uint16(unsafe.Sizeof(info)), 0)
	return c.scratch.info, err
}

// GetDevInfo reads a device's info (GET_DEV_INFO).
func (c *UblkControl) GetDevInfo(devID int) (UblkDevInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scratch.info = UblkDevInfo{}
	err := c.cmd("GET_DEV_INFO", ublkCmdGetDevInfo, iocRead, devID, unsafe.Pointer(&c.scratch.info), uint16(unsafe.Sizeof(c.scratch.info)), 0)
	return c.scratch.info, err
}

// SetParams sets a device's parameters before START_DEV (SET_PARAMS).
// p.Len and p.Types say which parts count; Len 0 means basic + discard.
func (c *UblkControl) SetParams(devID int, p UblkParams) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Len == 0 {
		p.Len = uint32(unsafe.Offsetof(p.Devt))
	}
	c.scratch.params = p
	return c.cmd("SET_PARAMS", ublkCmdSetParams, iocReadWrite, devID, unsafe.Pointer(&c.scratch.params), uint16(unsafe.Sizeof(p)), 0)
}

// GetParams reads a device's parameters (GET_PARAMS), with the char and
// disk device numbers.
func (c *UblkControl) GetParams(devID int) (UblkParams, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scratch.params = UblkParams{Len: uint32(unsafe.Sizeof(UblkParams{}))}
	err := c.cmd("GET_PARAMS", ublkCmdGetParams, iocRead, devID, unsafe.Pointer(&c.scratch.params), uint16(unsafe.Sizeof(c.scratch.params)), 0)
	return c.scratch.params, err
}

// StartDev creates /dev/ublkbN (START_DEV). The driver waits until every
// queue has fetched all its tags, so the queues must be running first.
func (c *UblkControl) StartDev(devID, pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd("START_DEV", ublkCmdStartDev, iocReadWrite, devID, nil, 0, uint64(pid))
}

// StopDev removes /dev/ublkbN (STOP_DEV): the driver writes back and
// completes the device's requests, then aborts the queues' fetches.
func (c *UblkControl) StopDev(devID int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd("STOP_DEV", ublkCmdStopDev, iocReadWrite, devID, nil, 0, 0)
}

// DelDev deletes the device (DEL_DEV); it waits until /dev/ublkcN is
// closed everywhere.
func (c *UblkControl) DelDev(devID int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd("DEL_DEV", ublkCmdDelDev, iocReadWrite, devID, nil, 0, 0)
}

// StartUserRecovery prepares a device whose server died for a new one
// (START_USER_RECOVERY). EBUSY: the old server has not finished exiting.
func (c *UblkControl) StartUserRecovery(devID int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd("START_USER_RECOVERY", ublkCmdStartRecovery, iocReadWrite, devID, nil, 0, 0)
}

// EndUserRecovery makes the device live again with the new server's
// queues (END_USER_RECOVERY); like StartDev it waits for the queues.
func (c *UblkControl) EndUserRecovery(devID, pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd("END_USER_RECOVERY", ublkCmdEndRecovery, iocReadWrite, devID, nil, 0, uint64(pid))
}

// UblkCharPath and UblkBlockPath name a device's nodes.
func UblkCharPath(devID int) string  { return fmt.Sprintf("/dev/ublkc%d", devID) }
func UblkBlockPath(devID int) string { return fmt.Sprintf("/dev/ublkb%d", devID) }

// UblkQueue is one hardware queue of a device, served by one OS thread:
// the driver takes the thread that fetched the queue's tags as the
// queue's daemon and accepts its later commands only from that thread,
// and it runs the request hand-over as task work in that thread. Lock the
// goroutine to its thread (runtime.LockOSThread) before OpenUblkQueue and
// keep it there until Close.
type UblkQueue struct {
	Ring   *Ring
	cdev   int
	qid    uint16
	depth  int
	legacy bool
	descs  []byte
}

// UblkQueueOptions says which queue to open.
type UblkQueueOptions struct {
	CharFD int // the open /dev/ublkcN
	QID    int
	Depth  int
	Legacy bool // UblkControl.Legacy(): legacy command numbers
	Extra  int  // more SQEs beyond one per tag
	// RingFlags for the queue's io_uring; when the kernel refuses them
	// (EINVAL) the ring is made without.
	RingFlags RingFlags
}

// Legacy reports whether the driver wants the legacy command numbers.
func (c *UblkControl) Legacy() bool { return c.legacy }

// OpenUblkQueue maps the queue's descriptors and sets up its io_uring.
func OpenUblkQueue(o UblkQueueOptions) (*UblkQueue, error) {
	if o.Depth <= 0 || o.Depth > ublkMaxQueueDepth {
		return nil, errors.New("ublk: queue depth out of range")
	}
	page := os.Getpagesize()
	size := (o.Depth*ublkIODescSize + page - 1) / page * page
	maxSize := (ublkMaxQueueDepth*ublkIODescSize + page - 1) / page * page
	descs, err := unix.Mmap(o.CharFD, int64(ublkCmdBufOffset+o.QID*maxSize), size, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ublk: mmap queue %d descriptors: %w", o.QID, err)
	}
	r, err := NewRing(uint32(o.Depth+o.Extra), o.RingFlags)
	if errors.Is(err, unix.EINVAL) && o.RingFlags != 0 {
		r, err = NewRing(uint32(o.Depth+o.Extra), 0)
	}
	if err != nil {
		unix.Munmap(descs)
		return nil, err
	}
	return &UblkQueue{Ring: r, cdev: o.CharFD, qid: uint16(o.QID), depth: o.Depth, legacy: o.Legacy, descs: descs}, nil
}

// Desc returns the descriptor of tag's current request (valid once the
// tag's fetch completed with 0).
func (q *UblkQueue) Desc(tag uint16) UblkIODesc {
	return *(*UblkIODesc)(unsafe.Pointer(&q.descs[int(tag)*ublkIODescSize]))
}

func (q *UblkQueue) prep(nr uint32, tag uint16, result int32, buf uintptr) error {
	op := ioc(iocReadWrite, nr, ublkIOCmdSize)
	if q.legacy {
		op = nr
	}
	cmd, err := q.Ring.PrepURingCmd(q.cdev, op, uint64(tag))
	if err != nil {
		return err
	}
	*(*uint16)(unsafe.Pointer(&cmd[0])) = q.qid
	*(*uint16)(unsafe.Pointer(&cmd[2])) = tag
	putU32(cmd[4:], uint32(result))
	putU64(cmd[8:], uint64(buf))
	return nil
}

// PrepFetch queues the first FETCH_REQ of tag, with its data buffer (the
// driver copies write data into it and read data out of it; it must stay
// mapped). The completion's user data is the tag.
func (q *UblkQueue) PrepFetch(tag uint16, buf uintptr) error {
	return q.prep(ublkIOFetchReq, tag, 0, buf)
}

// PrepCommitAndFetch queues the result of tag's request (bytes done, or a
// negative errno) and the fetch of its next one.
func (q *UblkQueue) PrepCommitAndFetch(tag uint16, result int32, buf uintptr) error {
	return q.prep(ublkIOCommitAndFetch, tag, result, buf)
}

// Close releases the queue's ring and descriptor mapping.
func (q *UblkQueue) Close() error {
	err := q.Ring.Close()
	if q.descs != nil {
		unix.Munmap(q.descs)
		q.descs = nil
	}
	return err
}
