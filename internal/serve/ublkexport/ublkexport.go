//go:build linux

// Package ublkexport serves an export.Backend as a kernel block device
// through the ublk driver (ublk_drv, Linux 6.0+; tested on 6.12):
// /dev/ublkbN, whose requests the driver hands to this process over
// io_uring. There is no protocol framing: each request arrives as a
// descriptor (operation, sector, length) and a per-tag buffer that the
// driver fills (writes) or drains (reads).
//
// One goroutine per queue, locked to its OS thread (the driver accepts a
// queue's commands only from the thread that fetched its tags and hands
// requests over in that thread's task work), owns the queue's io_uring.
// Requests are served by a pool of workers (one per tag), so a queue
// keeps as many requests in flight at the Backend as the device's queue
// depth; a worker hands its result back through a list and an eventfd
// that the queue's ring reads. Buffers are mapped once per tag: serving
// a request allocates nothing.
//
// With UBLK_F_USER_RECOVERY (+ _REISSUE) the device outlives its server:
// when the process dies the driver holds (and later re-issues) the
// device's requests until a new process calls Recover for the same
// device id, so a mounted filesystem stays mounted.
package ublkexport

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/serve/export"
	"mdtool/ioctl"
)

// Options shape the device. Zero values take the defaults.
type Options struct {
	Queues        int    // hardware queues; default min(NumCPU, 4), at most NumCPU
	Depth         int    // requests per queue; default 64
	MaxIO         uint32 // largest request in bytes; default max(1 MiB, Backend preferred), at most Backend max
	Boundary      uint32 // requests never cross a multiple of this (bytes; ublk chunk_sectors), e.g. the full stripe; 0: none
	IOMin         uint32 // minimum_io_size hint (md: the chunk); default the logical block
	IOOpt         uint32 // optimal_io_size hint (md: the full stripe); default Backend preferred
	PhysicalBlock uint32 // physical block size; default the logical block
	ID            int    // device number N of /dev/ublkbN; -1: any free one
	NoRecovery    bool   // do not ask for UBLK_F_USER_RECOVERY
	NoWriteCache  bool   // do not announce a volatile cache (then no FLUSH/FUA)
	Discard       bool   // announce discard and write-zeroes
	// StartTimeout bounds waits on the driver (the char node appearing);
	// default 30 s.
	StartTimeout time.Duration
	// RecoverTimeout bounds Recover's wait for the driver to let go of
	// the dead server; default 2 minutes. When every request of a queue
	// was with the dead server, the driver notices only at its request
	// timeout (30 s after the oldest request started, later on a loaded
	// machine), and only then quiesces the device.
	RecoverTimeout time.Duration
}

// Device is an attached /dev/ublkbN.
type Device struct {
	id     int
	ctrl   *ioctl.UblkControl
	cdev   *os.File
	b      export.Backend
	queues []*queue
	info   ioctl.UblkDevInfo
	params ioctl.UblkParams
	wg     sync.WaitGroup
	once   sync.Once
	detErr error
	errMu  sync.Mutex
	err    error
}

// Path is the block device, /dev/ublkbN.
func (d *Device) Path() string { return ioctl.UblkBlockPath(d.id) }

// ID is N of /dev/ublkbN.
func (d *Device) ID() int { return d.id }

// Info is the driver's device info (queues, depth, flags).
func (d *Device) Info() ioctl.UblkDevInfo { return d.info }

// Params are the parameters the device was started with.
func (d *Device) Params() ioctl.UblkParams { return d.params }

// Err is the first queue failure (nil while every queue serves).
func (d *Device) Err() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
}

func (d *Device) fail(err error) {
	d.errMu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.errMu.Unlock()
}

// ErrNoUblk is returned when the ublk driver is not there
// (/dev/ublk-control missing: modprobe ublk_drv).
var ErrNoUblk = errors.New("ublk: " + ioctl.UblkControlPath + " not found (modprobe ublk_drv)")

func openControl() (*ioctl.UblkControl, error) {
	c, err := ioctl.OpenUblkControl()
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoUblk
	}
	return c, err
}

func (o Options) withDefaults(b export.Backend) (Options, error) {
	min, pref, max := b.BlockSizes()
	if err := export.CheckBlockSizes(min, pref, max); err != nil {
		return o, err
	}
	if min < 512 || min > uint32(os.Getpagesize()) {
		return o, fmt.Errorf("ublk: logical block size %d not in 512..%d", min, os.Getpagesize())
	}
	if o.Queues <= 0 {
		o.Queues = 4
	}
	o.Queues = minInt(o.Queues, runtime.NumCPU())
	if o.Depth <= 0 {
		o.Depth = 64
	}
	o.Depth = minInt(o.Depth, 4096)
	if o.MaxIO == 0 {
		o.MaxIO = maxU32(1<<20, pref)
	}
	o.MaxIO = minU32(o.MaxIO, max)
	o.MaxIO -= o.MaxIO % uint32(os.Getpagesize())
	if o.MaxIO < uint32(os.Getpagesize()) || o.MaxIO < min {
		return o, fmt.Errorf("ublk: largest request %d too small", o.MaxIO)
	}
	if o.IOMin == 0 {
		o.IOMin = min
	}
	if o.IOOpt == 0 {
		o.IOOpt = pref
	}
	if o.PhysicalBlock == 0 {
		o.PhysicalBlock = min
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.RecoverTimeout <= 0 {
		o.RecoverTimeout = 2 * time.Minute
	}
	return o, nil
}

// shift is log2 of the largest power of two dividing v (ublk takes the
// block sizes and I/O hints as shifts, so a hint that is not a power of
// two, such as a 3-chunk full stripe, becomes its largest power-of-two
// divisor: a chunk multiple still aligned to what the array prefers).
func shift(v uint32) uint8 {
	if v == 0 {
		return 0
	}
	return uint8(bits.TrailingZeros32(v))
}

// Hint is what ublk can announce for an I/O size hint: the largest power
// of two dividing it.
func Hint(v uint32) uint32 {
	if v == 0 {
		return 0
	}
	return 1 << shift(v)
}

func params(b export.Backend, o Options) ioctl.UblkParams {
	min, _, _ := b.BlockSizes()
	p := ioctl.UblkParams{Types: ioctl.UblkParamTypeBasic}
	p.Basic = ioctl.UblkParamBasic{
		LogicalBSShift:  shift(min),
		PhysicalBSShift: shift(o.PhysicalBlock),
		IOMinShift:      shift(o.IOMin),
		IOOptShift:      shift(o.IOOpt),
		MaxSectors:      o.MaxIO >> 9,
		ChunkSectors:    o.Boundary >> 9,
		DevSectors:      uint64(b.Size()) >> 9,
	}
	if p.Basic.PhysicalBSShift < p.Basic.LogicalBSShift {
		p.Basic.PhysicalBSShift = p.Basic.LogicalBSShift
	}
	if !o.NoWriteCache {
		p.Basic.Attrs |= ioctl.UblkAttrVolatileCache | ioctl.UblkAttrFUA
	}
	if o.Discard {
		p.Types |= ioctl.UblkParamTypeDiscard
		p.Discard = ioctl.UblkParamDiscard{
			DiscardGranularity:    maxU32(min, Hint(o.IOMin)),
			MaxDiscardSectors:     o.MaxIO >> 9,
			MaxWriteZeroesSectors: o.MaxIO >> 9,
			MaxDiscardSegments:    1,
		}
	}
	return p
}

// Attach creates /dev/ublkbN for b and serves it until Detach.
func Attach(ctx context.Context, b export.Backend, o Options) (*Device, error) {
	o, err := o.withDefaults(b)
	if err != nil {
		return nil, err
	}
	ctrl, err := openControl()
	if err != nil {
		return nil, err
	}
	var flags uint64
	if !o.NoRecovery {
		flags = ioctl.UblkFUserRecovery | ioctl.UblkFUserRecoveryReissue
		if f := ctrl.Features(); f != 0 {
			flags &= f
		}
	}
	if !ctrl.Legacy() {
		flags |= ioctl.UblkFCmdIoctlEncode
	}
	id := ^uint32(0)
	if o.ID >= 0 {
		id = uint32(o.ID)
	}
	info, err := ctrl.AddDev(ioctl.UblkDevInfo{NrHWQueues: uint16(o.Queues), QueueDepth: uint16(o.Depth),
		MaxIOBufBytes: o.MaxIO, DevID: id, Flags: flags})
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	d := &Device{id: int(info.DevID), ctrl: ctrl, b: b, info: info, params: params(b, o)}
	if err := ctrl.SetParams(d.id, d.params); err != nil {
		d.abandon()
		return nil, err
	}
	if err := d.serve(ctx, o); err != nil {
		d.abandon()
		return nil, err
	}
	if err := ctrl.StartDev(d.id, os.Getpid()); err != nil {
		d.abandon()
		return nil, err
	}
	raiseMaxSectors(d.id, o.MaxIO)
	return d, nil
}

// raiseMaxSectors lets requests grow to maxIO: the block layer caps
// max_sectors_kb at 1280 KiB by default (BLK_DEF_MAX_SECTORS_CAP) below
// the device's max_hw_sectors_kb, which would split a 1.5 MiB full stripe.
// Best effort: the hint is only about performance.
func raiseMaxSectors(id int, maxIO uint32) {
	kb := maxIO >> 10
	if kb <= 1280 {
		return
	}
	p := fmt.Sprintf("/sys/block/ublkb%d/queue/max_sectors_kb", id)
	os.WriteFile(p, []byte(fmt.Sprintf("%d\n", kb)), 0o644)
}

// Recover takes over device id after its server died: the driver has
// held the device's requests (UBLK_F_USER_RECOVERY); this process serves
// them from b and everything queued continues. It waits (up to
// o.RecoverTimeout or ctx) for the driver to quiesce the device after the
// old server's exit (START_USER_RECOVERY answers EBUSY until then). Queues,
// depth and the largest request are the device's own.
func Recover(ctx context.Context, id int, b export.Backend, o Options) (*Device, error) {
	o, err := o.withDefaults(b)
	if err != nil {
		return nil, err
	}
	ctrl, err := openControl()
	if err != nil {
		return nil, err
	}
	info, err := ctrl.GetDevInfo(id)
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	if info.Flags&ioctl.UblkFUserRecovery == 0 {
		ctrl.Close()
		return nil, fmt.Errorf("ublk: device %d was not made recoverable", id)
	}
	deadline := time.Now().Add(o.RecoverTimeout)
	for {
		err = ctrl.StartUserRecovery(id)
		if err == nil || !errors.Is(err, unix.EBUSY) {
			break
		}
		if time.Now().After(deadline) {
			state := "live"
			if in, e := ctrl.GetDevInfo(id); e == nil && in.State == ioctl.UblkStateQuiesced {
				state = "quiesced (its char device still open)"
			}
			err = fmt.Errorf("ublk: device %d is still %s after %v: the old server has not let go: %w", id, state, o.RecoverTimeout, err)
			break
		}
		select {
		case <-ctx.Done():
			ctrl.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		ctrl.Close()
		return nil, err
	}
	p, _ := ctrl.GetParams(id)
	o.Queues, o.Depth, o.MaxIO = int(info.NrHWQueues), int(info.QueueDepth), info.MaxIOBufBytes
	d := &Device{id: id, ctrl: ctrl, b: b, info: info, params: p}
	if err := d.serve(ctx, o); err != nil {
		d.stopQueues()
		ctrl.Close()
		return nil, err
	}
	if err := ctrl.EndUserRecovery(id, os.Getpid()); err != nil {
		d.stopQueues()
		ctrl.Close()
		return nil, err
	}
	return d, nil
}

// serve opens /dev/ublkcN and starts the queues; it returns when every
// queue has fetched its tags (or one failed).
func (d *Device) serve(ctx context.Context, o Options) error {
	path := ioctl.UblkCharPath(d.id)
	deadline := time.Now().Add(o.StartTimeout)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			d.cdev = f
			break
		}
		// devtmpfs makes the node asynchronously after ADD_DEV
		if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	ready := make(chan error, int(d.info.NrHWQueues))
	for q := 0; q < int(d.info.NrHWQueues); q++ {
		qu := newQueue(d, q, int(d.info.QueueDepth), d.info.MaxIOBufBytes)
		d.queues = append(d.queues, qu)
		d.wg.Add(1)
		go qu.run(ready)
	}
	var first error
	for range d.queues {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// stopQueues makes every queue loop end (used when starting failed and the
// driver will never abort the fetches), then waits for them.
func (d *Device) stopQueues() {
	for _, q := range d.queues {
		q.kill()
	}
	d.wg.Wait()
	d.closeChar()
}

func (d *Device) closeChar() {
	if d.cdev != nil {
		d.cdev.Close()
		d.cdev = nil
	}
}

// abandon undoes a failed Attach.
func (d *Device) abandon() {
	d.ctrl.StopDev(d.id)
	d.stopQueues()
	d.ctrl.DelDev(d.id)
	d.ctrl.Close()
}

// Detach stops the device: the driver writes back and completes what the
// device holds (through the queues), then the queues end; the Backend is
// flushed and the device deleted. It may be called more than once.
func (d *Device) Detach() error {
	d.once.Do(func() {
		err := d.ctrl.StopDev(d.id)
		done := make(chan struct{})
		go func() { d.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			// a queue never saw its aborts: end the loops ourselves
			for _, q := range d.queues {
				q.kill()
			}
			<-done
		}
		d.closeChar()
		if ferr := d.b.Flush(); err == nil {
			err = ferr
		}
		if derr := d.ctrl.DelDev(d.id); err == nil {
			err = derr
		}
		d.ctrl.Close()
		d.detErr = err
	})
	return d.detErr
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func minU32(a, b uint32) uint32 {
	if a < b {
		return a
	}
	return b
}

func maxU32(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}
