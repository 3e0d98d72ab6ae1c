// Package fuseexport serves an export.Backend as one regular file in a FUSE
// mount, so that `losetup` can turn it into a block device (/dev/loopN)
// without NBD or ublk.
//
// The file is opened with direct I/O: reads and writes go to the Backend
// without the kernel page cache, a write is with the Backend when it is
// acknowledged, writes made with O_DSYNC/O_SYNC (file flag or RWF_DSYNC) use
// Backend.WriteAtFUA, and fsync calls Backend.Flush. The loop driver's
// discard (fallocate PUNCH_HOLE) becomes Backend.WriteZeroes with mayTrim,
// ZERO_RANGE becomes WriteZeroes without it. The size is fixed; truncation,
// chmod/chown and name-space changes fail with EPERM.
//
// Requests need not be aligned: partial blocks of the Backend's minimum
// block size are read, modified and written back under a lock that excludes
// every other write. Requests are served concurrently, one goroutine each.
// The loop driver uses 512-byte sectors for a file on FUSE; for a Backend
// with a larger minimum block attach with `losetup --sector-size MIN` so that
// loop I/O stays aligned and never takes the read-modify-write path.
//
// Typical use (as root):
//
//	srv, err := fuseexport.Mount("/run/mdtool/md0", "disk", array, fuseexport.Options{})
//	// losetup --find --show --direct-io=on /run/mdtool/md0/disk
//	...
//	err = srv.Unmount() // after losetup -d
package fuseexport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/metrics"
)

// Options tune a mount. The zero value is usable.
type Options struct {
	// Mode is the file's permission bits; 0 means 0600.
	Mode uint32
	// UID and GID own the file; both 0 means the caller's ids.
	UID, GID uint32
	// AllowOther lets users other than the mounting one in (the kernel
	// still checks Mode: the mount uses default_permissions). Needs
	// user_allow_other in /etc/fuse.conf when not mounting as root.
	AllowOther bool
	// ReadOnly mounts read-only: opening for writing fails with EROFS.
	ReadOnly bool
	// MaxWrite is the largest read or write request the kernel sends; 0
	// means 1 MiB (the kernel's and go-fuse's cap).
	MaxWrite int
	// MaxBackground is how many asynchronous requests (the loop driver's
	// direct I/O, readahead) the kernel keeps in flight; 0 means 64.
	MaxBackground int
	// FsName is the source shown in /proc/mounts; "" means "mdtool".
	FsName string
	// Metrics, if set, receives every request (ops read, write, flush,
	// discard, write_zeroes).
	Metrics *metrics.Array
	// Debug logs every FUSE request.
	Debug bool
}

// Server is a mounted export.
type Server struct {
	srv  *fuse.Server
	fs   *fileFS
	dir  string
	path string
	done chan struct{}
	mu   sync.Mutex
}

// ErrName reports an unusable file name.
var ErrName = errors.New("fuseexport: file name must be one non-empty path element")

// Mount mounts a FUSE file system on dir (an existing directory) holding one
// file called name whose contents are b, and starts serving it. The file is
// ready when Mount returns.
func Mount(dir, name string, b export.Backend, opts Options) (*Server, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") ||
		name == ".go-fuse-epoll-hack" {
		return nil, fmt.Errorf("%w: %q", ErrName, name)
	}
	if err := export.CheckBlockSizes(b.BlockSizes()); err != nil {
		return nil, fmt.Errorf("fuseexport: %w", err)
	}
	if b.Size() <= 0 {
		return nil, fmt.Errorf("fuseexport: backend size %d", b.Size())
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if deadMount(abs, err) {
		// A dead FUSE mount: its server was killed (kill -9 of a daemon)
		// without unmounting. Detach it lazily, as fusermount3 -uz does,
		// and mount over the directory again.
		if uerr := detachStale(abs); uerr != nil {
			return nil, fmt.Errorf("fuseexport: %s is a dead FUSE mount and could not be detached: %w", abs, uerr)
		}
		st, err = os.Stat(abs)
	}
	if err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("fuseexport: %s is not a directory", abs)
	}
	if opts.Mode&0o7777 == 0 {
		opts.Mode = 0o600
	}
	if opts.UID == 0 && opts.GID == 0 {
		opts.UID, opts.GID = uint32(os.Getuid()), uint32(os.Getgid())
	}
	maxWrite := opts.MaxWrite
	if maxWrite <= 0 || maxWrite > fuse.MAX_KERNEL_WRITE {
		maxWrite = fuse.MAX_KERNEL_WRITE
	}
	bg := opts.MaxBackground
	if bg <= 0 {
		bg = 64
	}
	fsName := opts.FsName
	if fsName == "" {
		fsName = "mdtool"
	}
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)
	mountOpts := []string{"default_permissions"}
	if opts.ReadOnly {
		flags |= syscall.MS_RDONLY
		mountOpts = append(mountOpts, "ro")
	}
	fs := newFileFS(name, b, &opts)
	mo := &fuse.MountOptions{
		AllowOther:    opts.AllowOther,
		Options:       mountOpts,
		MaxBackground: bg,
		MaxWrite:      maxWrite,
		FsName:        fsName,
		Name:          "mdtool",
		// Every request runs in its own goroutine (go-fuse's default);
		// concurrent loop-device I/O is not serialised.
		SingleThreaded:     false,
		DisableXAttrs:      true,
		DisableReadDirPlus: true,
		// Replies are byte slices, never file descriptors: splicing buys
		// nothing and fails noisily for 1 MiB reads (pipe size).
		DisableSplice: true,
		// As root, mount(2) directly; otherwise (or if that fails) through
		// fusermount3.
		DirectMount:      os.Geteuid() == 0,
		DirectMountFlags: flags,
		// Asynchronous direct I/O lets the loop driver keep several
		// requests in flight per file; shared mmap of a direct-I/O file
		// needs DIRECT_IO_ALLOW_MMAP (Linux 6.6+; ignored where absent).
		ExtraCapabilities: fuse.CAP_ASYNC_DIO | fuse.CAP_DIRECT_IO_ALLOW_MMAP,
		Debug:             opts.Debug,
	}
	srv, err := fuse.NewServer(fs, abs, mo)
	if err != nil {
		return nil, fmt.Errorf("fuseexport: mount %s: %w", abs, err)
	}
	s := &Server{srv: srv, fs: fs, dir: abs, path: filepath.Join(abs, name), done: make(chan struct{})}
	go func() {
		srv.Serve()
		close(s.done)
	}()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("fuseexport: mount %s: %w", abs, err)
	}
	return s, nil
}

// Path returns the exported file's path.
func (s *Server) Path() string { return s.path }

// Dir returns the mount point.
func (s *Server) Dir() string { return s.dir }

// Wait blocks until the file system is unmounted (by Unmount or by someone
// running umount) and every request has been answered.
func (s *Server) Wait() { <-s.done }

// Unmount unmounts the file system and waits for the serving loop to end.
// It fails (typically with EBUSY) while the file is open, e.g. attached to a
// loop device. Unmounting an unmounted Server returns nil.
func (s *Server) Unmount() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.srv.Unmount(); err != nil {
		select {
		case <-s.done: // unmounted meanwhile by someone else
			return nil
		default:
		}
		return fmt.Errorf("fuseexport: unmount %s: %w", s.dir, err)
	}
	<-s.done
	return nil
}

// deadMount reports whether dir is a FUSE mount whose server is gone:
// stat fails with ENOTCONN, or, while stat still answers from the
// attribute cache, statfs (which always asks the server) fails with
// ENOTCONN or ECONNABORTED, or EIO (a request the server took and never
// answered before it was killed is ended with EIO when the connection
// is aborted).
func deadMount(dir string, statErr error) bool {
	dead := func(err error) bool {
		return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) ||
			errors.Is(err, syscall.EIO) && fuseMountPoint(dir)
	}
	if dead(statErr) {
		return true
	}
	var sfs syscall.Statfs_t
	return dead(syscall.Statfs(dir, &sfs))
}

// fuseMountPoint reports whether dir is the mount point of a FUSE file
// system (/proc/self/mountinfo: mount point in field 5, the file system
// type after the " - " separator).
func fuseMountPoint(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != dir {
			continue
		}
		if i := strings.Index(line, " - "); i >= 0 {
			if t := strings.Fields(line[i+3:]); len(t) > 0 && (t[0] == "fuse" || strings.HasPrefix(t[0], "fuse.")) {
				return true
			}
		}
	}
	return false
}

// detachStale lazily unmounts a dead FUSE mount on dir: umount2(MNT_DETACH)
// as root, fusermount3 -uz otherwise (or when that is refused).
func detachStale(dir string) error {
	err := syscall.Unmount(dir, syscall.MNT_DETACH)
	if err == nil || !errors.Is(err, syscall.EPERM) {
		return err
	}
	out, ferr := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput()
	if ferr != nil {
		return fmt.Errorf("%w; fusermount3 -uz: %v: %s", err, ferr, strings.TrimSpace(string(out)))
	}
	return nil
}
