// Package daemon runs an assembled md array as a long-lived service: the
// run directory with one lock, control socket and NBD socket per array, the
// control protocol (server and client), the readiness hand-over from a
// background daemon to the command that started it (and to systemd), and
// the service itself (engine array + NBD, FUSE and metrics exports).
//
// Run directory layout, for an array named NAME (see ArrayName):
//
//	NAME.lock   flock(2)ed exclusively by the daemon for its whole life
//	NAME.sock   control socket (mode 0600), line-delimited JSON requests
//	NAME.nbd    default NBD unix socket (mode 0600)
//	NAME.log    log of a background daemon
//
// The lock decides who owns NAME: a socket file left behind by a daemon
// that died is removed by the next one, after checking that nobody
// answers on it. The package prints nothing: package cmd words every
// message.
package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"mdtool/internal/mdadm/plan"

	"golang.org/x/sys/unix"
)

// DefaultRunDir is the run directory unless --run-dir or MDTOOL_RUN_DIR
// say otherwise.
const DefaultRunDir = "/run/mdtool"

// ErrRunning: another live daemon holds the array's lock.
var ErrRunning = errors.New("daemon: array is already running")

// ErrNotRunning: no daemon serves the array.
var ErrNotRunning = errors.New("daemon: array is not running")

// ErrBadName: the md device name cannot name a run-directory entry.
var ErrBadName = errors.New("daemon: unusable array name")

// ArrayName turns an md device as mdadm accepts it into the name of the
// array's run-directory entries, the way mdadm's devname_matches compares
// names: "/dev/md/NAME" and "/dev/NAME" lose their prefix, and the numbered
// forms "/dev/md0", "/dev/md/0", "md0" and "0" all become "md0". Control
// bytes, invalid UTF-8 and unprintable runes are written as plan.EscapeName
// writes them ("\n", "\x1b", backslash as "\\"), so that an entry name
// is always printable; "/", "", "." and ".." are refused (mdadm refuses
// such md device names too).
func ArrayName(dev string) (string, error) {
	n := dev
	switch {
	case strings.HasPrefix(n, "/dev/md/"):
		n = n[len("/dev/md/"):]
	case strings.HasPrefix(n, "/dev/"):
		n = n[len("/dev/"):]
	}
	if isDigits(n) {
		n = "md" + n
	}
	if n == "" || n == "." || n == ".." || strings.Contains(n, "/") {
		return "", fmt.Errorf("%w: %q", ErrBadName, dev)
	}
	n = plan.EscapeName(n)
	if len(n) > 200 {
		return "", fmt.Errorf("%w: %q", ErrBadName, dev)
	}
	return n, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Paths are the run-directory entries of one array.
type Paths struct {
	Dir, Name string
}

// PathsFor returns the entries of array name in dir.
func PathsFor(dir, name string) Paths { return Paths{Dir: dir, Name: name} }

func (p Paths) join(ext string) string { return filepath.Join(p.Dir, p.Name+ext) }

// Lock is the lock file.
func (p Paths) Lock() string { return p.join(".lock") }

// Control is the control socket.
func (p Paths) Control() string { return p.join(".sock") }

// NBD is the default NBD socket.
func (p Paths) NBD() string { return p.join(".nbd") }

// Log is the log file of a background daemon.
func (p Paths) Log() string { return p.join(".log") }

// EnsureDir creates the run directory (mode 0755) if needed.
func EnsureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("daemon: run directory: %w", err)
	}
	return nil
}

// Lock is a held array lock.
type Lock struct {
	f    *os.File
	path string
}

// AcquireLock takes the array's lock without waiting. It returns
// ErrRunning when a live daemon holds it. A lock file left by a dead
// daemon is simply taken over: flock locks die with their process.
func AcquireLock(p Paths) (*Lock, error) {
	if err := EnsureDir(p.Dir); err != nil {
		return nil, err
	}
	// The log is opened later, by the background daemon; a symlink there
	// is refused now, while the user still sees the error.
	if err := checkRunFile(p.Log()); err != nil {
		return nil, err
	}
	f, err := openRunFile(p.Lock(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("daemon: lock %s: %w", p.Lock(), err)
	}
	// Record the owner for humans; the lock itself is what counts.
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	return &Lock{f: f, path: p.Lock()}, nil
}

// Release drops the lock (the file stays: removing it would race with a
// daemon that opened it but has not locked it yet).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// File returns the open lock file (for handing it to a child process).
func (l *Lock) File() *os.File { return l.f }

// Held reports whether a live process holds the array's lock.
func Held(p Paths) bool {
	f, err := openRunFile(p.Lock(), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// openRunFile opens a file of the run directory (NAME.lock, NAME.log)
// without following a symbolic link (O_NOFOLLOW) and without blocking
// (O_NONBLOCK, a FIFO planted there), and refuses anything but a regular
// file.
func openRunFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("daemon: %s is a symbolic link: refusing to follow it", path)
		}
		return nil, fmt.Errorf("daemon: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("daemon: %s is not a regular file", path)
	}
	return f, nil
}

// checkRunFile refuses a run-directory file that exists and is a symbolic
// link or not a regular file.
func checkRunFile(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("daemon: %w", err)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("daemon: %s is a symbolic link: refusing to follow it", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("daemon: %s is not a regular file", path)
	}
	return nil
}

// RemoveStaleSocket removes the socket file at path when nobody answers on
// it. It fails when a live server accepts connections there.
func RemoveStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("daemon: %s is a symbolic link: refusing to follow it", path)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("daemon: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("daemon: %s: socket in use", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ListenUnix listens on a unix socket at path with mode 0600, replacing a
// stale socket file. The socket is bound in a private (0700) directory
// next to path, made 0600 and then renamed into place, so that nobody can
// connect before its mode is right. Closing the listener removes path.
func ListenUnix(path string) (net.Listener, error) {
	if err := RemoveStaleSocket(path); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".bind-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bind := filepath.Join(tmp, "s")
	l, err := net.Listen("unix", bind)
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(bind, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Rename(bind, path); err != nil {
		l.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ul, path: path}, nil
}

// unixListener removes its socket file on Close.
type unixListener struct {
	*net.UnixListener
	path string
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	os.Remove(l.path)
	return err
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Names lists the arrays with a live daemon in dir, sorted.
func Names(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || n == "" {
			continue
		}
		if Held(PathsFor(dir, n)) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// rdevOf returns the device numbers of a device node.
func rdevOf(fi os.FileInfo) ([2]uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint32{}, false
	}
	return [2]uint32{unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))}, true
}

// UblkStatus says whether the ublk driver is there (/sys/module/ublk_drv
// or /dev/ublk-control). mdtool does not export through ublk yet.
func UblkStatus() (present bool, why string) {
	if _, err := os.Stat("/dev/ublk-control"); err == nil {
		return true, "/dev/ublk-control exists"
	}
	if _, err := os.Stat("/sys/module/ublk_drv"); err == nil {
		return true, "module ublk_drv is loaded"
	}
	return false, "no ublk_drv module and no /dev/ublk-control"
}
