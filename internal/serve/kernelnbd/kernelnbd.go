// Package kernelnbd serves an export.Backend as a kernel block device,
// /dev/nbdN, through the kernel's NBD client: socketpairs whose one end
// the in-process NBD server (internal/serve/nbd) serves in the
// transmission phase and whose other end is given to the kernel with
// NBD_CMD_CONNECT over generic netlink (package ioctl), as "nbd-client -N"
// or "qemu-nbd -c" do over TCP.
//
// The device gets the Backend's size and minimum block size (its logical
// and physical block size), the server's transmission flags (FLUSH, FUA,
// TRIM, WRITE_ZEROES, MULTI_CONN) and several connections. NBD carries no
// I/O hints: the device's minimum_io_size and optimal_io_size stay at the
// block size and 0 (the ublk door carries them).
//
// A dead-connection timeout keeps the device when the serving process
// dies: requests wait for new connections, which the next process gives
// with Reattach (NBD_CMD_RECONFIGURE) to the same /dev/nbdN.
package kernelnbd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
	"mdtool/ioctl"
)

// Options configure a device. Zero values select the defaults.
type Options struct {
	// Conns is the number of connections (default min(4, NumCPU)).
	Conns int
	// Timeout is the kernel's request timeout (default 1 minute). With
	// several connections a request that takes longer makes the kernel
	// drop its connection and send it on another one; requests a killed
	// server took are sent again after it, on the connections Reattach
	// gave.
	Timeout time.Duration
	// DeadConnTimeout is how long the kernel keeps requests once every
	// connection is dead, waiting for Reattach (default 2 minutes).
	DeadConnTimeout time.Duration
	// Backend identifies the data (e.g. the array's UUID): Reattach with
	// another one is refused by the kernel.
	Backend string
	// ReadOnly devices refuse writes.
	ReadOnly bool
	// Logger receives the NBD server's warnings (default: discard).
	Logger *slog.Logger
	// MaxBytes bounds the payload bytes in flight (nbd.Config.MaxBytes).
	MaxBytes int64
}

// Defaults of Options.
const (
	DefaultTimeout         = time.Minute
	DefaultDeadConnTimeout = 2 * time.Minute
)

// Device is a Backend served as /dev/nbdN.
type Device struct {
	index int
	srv   *nbd.Server
	wg    sync.WaitGroup

	mu       sync.Mutex
	detached bool
}

// Available says whether the kernel NBD client can be used here (the
// module is loaded if needed); the error says why not.
func Available() error { return ioctl.NBDAvailable() }

// Attach serves be as a new NBD device (index -1: the first free one, as
// the kernel picks it).
func Attach(be export.Backend, index int, opts Options) (*Device, error) {
	return start(be, opts, func(cfg ioctl.NBDConfig) (int, error) {
		return ioctl.NBDConnect(index, cfg)
	})
}

// Reattach serves be on the configured device index whose connections
// died (the previous server was killed): NBD_CMD_RECONFIGURE gives the
// kernel new connections; the requests it kept continue.
func Reattach(be export.Backend, index int, opts Options) (*Device, error) {
	return start(be, opts, func(cfg ioctl.NBDConfig) (int, error) {
		return index, ioctl.NBDReconfigure(index, cfg)
	})
}

func start(be export.Backend, opts Options, configure func(ioctl.NBDConfig) (int, error)) (*Device, error) {
	if opts.Conns <= 0 {
		opts.Conns = min(4, runtime.NumCPU())
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.DeadConnTimeout <= 0 {
		opts.DeadConnTimeout = DefaultDeadConnTimeout
	}
	srv, err := nbd.NewServer(nbd.Config{Exports: []nbd.Export{{Backend: be, ReadOnly: opts.ReadOnly}},
		Logger: opts.Logger, MaxBytes: opts.MaxBytes})
	if err != nil {
		return nil, err
	}
	flags, _ := srv.TransmissionFlags("")
	bs, _, _ := be.BlockSizes()
	cfg := ioctl.NBDConfig{Size: uint64(be.Size()), BlockSize: uint64(max(bs, 512)),
		Timeout: uint64(opts.Timeout / time.Second), DeadConnTimeout: uint64(opts.DeadConnTimeout / time.Second),
		ServerFlags: uint64(flags), Backend: opts.Backend}
	d := &Device{srv: srv}
	var kernelEnds []int
	defer func() {
		for _, fd := range kernelEnds {
			unix.Close(fd) // the kernel holds its own reference
		}
	}()
	for i := 0; i < opts.Conns; i++ {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			srv.Close()
			return nil, os.NewSyscallError("socketpair", err)
		}
		kernelEnds = append(kernelEnds, fds[0])
		f := os.NewFile(uintptr(fds[1]), "nbd-server")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			srv.Close()
			return nil, err
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			srv.ServeTransmission(nc, "")
		}()
	}
	cfg.Sockets = kernelEnds
	if d.index, err = configure(cfg); err != nil {
		// Closing the kernel ends (deferred) ends our connections.
		for _, fd := range kernelEnds {
			unix.Shutdown(fd, unix.SHUT_RDWR)
		}
		srv.Close()
		return nil, err
	}
	return d, nil
}

// Index is N of /dev/nbdN.
func (d *Device) Index() int { return d.index }

// Path is the device node, /dev/nbdN.
func (d *Device) Path() string { return DevicePath(d.index) }

// DevicePath is /dev/nbdN for index N.
func DevicePath(index int) string { return "/dev/nbd" + strconv.Itoa(index) }

// Detach flushes the device (fsync on it: the kernel writes back its
// cache and sends NBD_CMD_FLUSH), disconnects it (NBD_CMD_DISCONNECT: the
// kernel sends NBD_CMD_DISC on every connection), waits up to a minute
// for the connections to end and stops the server, which flushes the
// Backend. The caller makes sure nobody uses the device.
func (d *Device) Detach() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detached {
		return nil
	}
	d.detached = true
	var errs []error
	if f, err := os.OpenFile(d.Path(), os.O_RDONLY, 0); err == nil {
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("flush %s: %w", d.Path(), err))
		}
		f.Close()
	}
	if err := ioctl.NBDDisconnect(d.index); err != nil {
		errs = append(errs, err)
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		errs = append(errs, fmt.Errorf("%s: the kernel kept its connections after the disconnect", d.Path()))
	}
	if err := d.srv.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Abandon stops serving without disconnecting, as a killed process would:
// the kernel keeps the device and its requests for DeadConnTimeout,
// waiting for Reattach (tests).
func (d *Device) Abandon() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.detached = true
	return d.srv.Close()
}

// Configured says whether /dev/nbdN is still configured (its sysfs pid
// file exists: a connect that was never disconnected), e.g. after the
// process that served it died.
func Configured(index int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/pid", index))
	return err == nil && strings.TrimSpace(string(b)) != ""
}

// BackendOf is the backend identifier the device was connected with
// ("" if none or no such device).
func BackendOf(index int) string {
	b, err := os.ReadFile(fmt.Sprintf("/sys/block/nbd%d/backend", index))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Disconnect disconnects device index, e.g. one that a killed server left
// configured and that nobody will re-attach.
func Disconnect(index int) error { return ioctl.NBDDisconnect(index) }
