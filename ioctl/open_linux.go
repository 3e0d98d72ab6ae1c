//go:build linux

package ioctl

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotMember is matched (errors.Is) by OpenMember's error for a path
// that is neither a block device nor a regular file (a FIFO, a character
// device, a directory, a socket).
var ErrNotMember = errors.New("not a block device or regular file")

// NotMemberError is OpenMember's error for a path of the wrong type. It
// matches ErrNotMember.
type NotMemberError struct {
	Path string
}

func (e *NotMemberError) Error() string { return e.Path + " is not a block device or regular file" }

// Unwrap lets errors.Is match ErrNotMember.
func (e *NotMemberError) Unwrap() error { return ErrNotMember }

// OpenOptions say how OpenMember opens a member.
type OpenOptions struct {
	// Write opens read-write (O_RDWR) instead of read-only.
	Write bool
	// Exclusive refuses a member in use: a block device is opened with
	// O_EXCL (the kernel refuses it while mounted, an active md member or
	// held exclusively by another opener), a regular file is locked with
	// flock(LOCK_EX|LOCK_NB) (held by another mdtool command or daemon).
	// The lock lasts until the file is closed. Both failures are
	// *BusyError.
	Exclusive bool
	// Direct adds O_DIRECT for block devices (never for regular files).
	Direct bool
}

// OpenMember is the one way mdtool opens an array member (a block device
// or an image file). It never blocks in open(): the path is opened with
// O_NONBLOCK, which is cleared again once fstat has shown a block device
// or a regular file; anything else (a FIFO, a character device, a
// directory, a socket) is refused with *NotMemberError before it is
// opened, and again after, should the path have been replaced in
// between. See OpenOptions for the exclusive modes.
func OpenMember(path string, o OpenOptions) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if !memberType(st.Mode) {
		return nil, &NotMemberError{Path: path}
	}
	block := st.Mode&unix.S_IFMT == unix.S_IFBLK
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	if o.Write {
		flags = unix.O_RDWR | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
	}
	if block && o.Exclusive {
		flags |= unix.O_EXCL
	}
	if block && o.Direct {
		flags |= unix.O_DIRECT
	}
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if block && o.Exclusive && err == unix.EBUSY {
			return nil, &BusyError{Path: path}
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	fail := func(e error) (*os.File, error) {
		unix.Close(fd)
		return nil, e
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(&os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if !memberType(st.Mode) {
		return fail(&NotMemberError{Path: path})
	}
	if block != (st.Mode&unix.S_IFMT == unix.S_IFBLK) {
		return fail(&os.PathError{Op: "open", Path: path, Err: errors.New("changed type while being opened")})
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		return fail(&os.PathError{Op: "fcntl", Path: path, Err: err})
	}
	if !block && o.Exclusive {
		err = flockMember(fd, &st)
		if err == unix.EWOULDBLOCK {
			return fail(&BusyError{Path: path})
		}
		if err != nil {
			return fail(&os.PathError{Op: "flock", Path: path, Err: err})
		}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// IsMemberType reports whether fi describes something OpenMember accepts:
// a regular file or a block device.
func IsMemberType(fi os.FileInfo) bool {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return memberType(st.Mode)
	}
	return fi.Mode().IsRegular()
}

func memberType(mode uint32) bool {
	t := mode & unix.S_IFMT
	return t == unix.S_IFREG || t == unix.S_IFBLK
}
