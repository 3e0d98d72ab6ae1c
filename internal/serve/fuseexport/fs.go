package fuseexport

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/metrics"
)

const (
	rootID = fuse.FUSE_ROOT_ID // the mount's directory
	fileID = 2                 // the exported file
)

// Linux fallocate modes (include/uapi/linux/falloc.h).
const (
	fallocKeepSize    = 0x01
	fallocPunchHole   = 0x02
	fallocZeroRange   = 0x10
	fallocWriteZeroes = 0x80 // Linux 6.17
)

// attrTimeout is how long the kernel may cache names and attributes; they
// never change while mounted.
const attrTimeout = time.Hour

// fileFS is the raw FUSE file system: a root directory holding one regular
// file whose contents are the Backend.
type fileFS struct {
	fuse.RawFileSystem // ENOSYS for everything not implemented here

	b        export.Backend
	name     string
	size     atomic.Int64 // the Backend's size, kept by Server.Resize
	blk      int64        // Backend minimum block: requests are aligned to it
	max      int64        // largest Backend request
	readOnly bool
	m        *metrics.Array
	now      time.Time
	uid, gid uint32
	mode     uint32

	// rmw orders unaligned writes (read-modify-write of a partial block)
	// against all other writes: aligned writes hold it shared, partial-block
	// updates exclusively. Unused when blk is 1.
	rmw     sync.RWMutex
	scratch sync.Pool // []byte of blk bytes
	gather  sync.Pool // *[]byte for split WRITE payloads
}

func newFileFS(name string, b export.Backend, opts *Options) *fileFS {
	minBlk, _, maxReq := b.BlockSizes()
	fs := &fileFS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		b:             b,
		name:          name,
		blk:           int64(minBlk),
		max:           int64(maxReq) &^ (int64(minBlk) - 1),
		readOnly:      opts.ReadOnly,
		m:             opts.Metrics,
		now:           time.Now(),
		uid:           opts.UID,
		gid:           opts.GID,
		mode:          opts.Mode & 0o7777,
	}
	fs.size.Store(b.Size())
	fs.scratch.New = func() any { return make([]byte, fs.blk) }
	return fs
}

func (fs *fileFS) String() string { return "mdtool" }

func (fs *fileFS) setTimes(a *fuse.Attr) {
	sec, nsec := uint64(fs.now.Unix()), uint32(fs.now.Nanosecond())
	a.Atime, a.Mtime, a.Ctime = sec, sec, sec
	a.Atimensec, a.Mtimensec, a.Ctimensec = nsec, nsec, nsec
	a.Owner = fuse.Owner{Uid: fs.uid, Gid: fs.gid}
}

func (fs *fileFS) fileAttr(a *fuse.Attr) {
	size := fs.size.Load()
	*a = fuse.Attr{Ino: fileID, Size: uint64(size), Blocks: uint64(size+511) / 512,
		Mode: syscall.S_IFREG | fs.mode, Nlink: 1, Blksize: uint32(fs.blk)}
	fs.setTimes(a)
}

func (fs *fileFS) dirAttr(a *fuse.Attr) {
	*a = fuse.Attr{Ino: rootID, Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Blksize: uint32(fs.blk)}
	fs.setTimes(a)
}

func (fs *fileFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if h.NodeId != rootID {
		return fuse.ENOTDIR
	}
	if name != fs.name {
		return fuse.ENOENT
	}
	out.NodeId, out.Generation = fileID, 1
	out.SetEntryTimeout(attrTimeout)
	out.SetAttrTimeout(attrTimeout)
	fs.fileAttr(&out.Attr)
	return fuse.OK
}

func (fs *fileFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	switch in.NodeId {
	case rootID:
		fs.dirAttr(&out.Attr)
	case fileID:
		fs.fileAttr(&out.Attr)
	default:
		return fuse.ENOENT
	}
	out.SetTimeout(attrTimeout)
	return fuse.OK
}

// SetAttr accepts only what changes nothing: time updates (ignored; the
// times stay those of the mount), the current size and the current mode and
// owner. Truncation and chmod/chown get EPERM.
func (fs *fileFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.NodeId != fileID {
		return fuse.EPERM
	}
	if in.Valid&fuse.FATTR_SIZE != 0 && int64(in.Size) != fs.size.Load() ||
		in.Valid&fuse.FATTR_MODE != 0 && in.Mode&0o7777 != fs.mode ||
		in.Valid&fuse.FATTR_UID != 0 && in.Uid != fs.uid ||
		in.Valid&fuse.FATTR_GID != 0 && in.Gid != fs.gid {
		return fuse.EPERM
	}
	fs.fileAttr(&out.Attr)
	out.SetTimeout(attrTimeout)
	return fuse.OK
}

func (fs *fileFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.NodeId != fileID {
		return fuse.EISDIR
	}
	if fs.readOnly && in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return fuse.EROFS
	}
	// Direct I/O: no page cache between callers and the Backend, so a write
	// reaches the Backend before it is acknowledged and fsync has nothing
	// cached to write back. Parallel direct writes: the kernel does not
	// serialise writes on the inode lock (they never extend the file).
	out.OpenFlags = fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	return fuse.OK
}

func (fs *fileFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.NodeId != rootID {
		return fuse.ENOTDIR
	}
	return fuse.OK
}

func (fs *fileFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if in.NodeId != rootID {
		return fuse.ENOTDIR
	}
	entries := []fuse.DirEntry{
		{Name: ".", Mode: syscall.S_IFDIR, Ino: rootID},
		{Name: "..", Mode: syscall.S_IFDIR, Ino: rootID},
		{Name: fs.name, Mode: syscall.S_IFREG, Ino: fileID},
	}
	for i := int(in.Offset); i < len(entries); i++ {
		e := entries[i]
		e.Off = uint64(i + 1)
		if !out.AddDirEntry(e) {
			break
		}
	}
	return fuse.OK
}

func (fs *fileFS) ReleaseDir(in *fuse.ReleaseIn) {}

func (fs *fileFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status { return fuse.OK }

func (fs *fileFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	// The loop driver takes its discard granularity from f_bsize.
	*out = fuse.StatfsOut{Blocks: uint64(fs.size.Load() / fs.blk), Files: 2, Bsize: uint32(fs.blk),
		Frsize: uint32(fs.blk), NameLen: 255}
	return fuse.OK
}

// The name space is fixed.

func (fs *fileFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.EPERM
}

func (fs *fileFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.EPERM
}

// Data path.

// errStatus maps a Backend error to an errno: a syscall.Errno in the chain
// is passed on, anything else is EIO.
func errStatus(err error) fuse.Status {
	var en syscall.Errno
	if errors.As(err, &en) && en != 0 {
		return fuse.Status(en)
	}
	return fuse.EIO
}

func (fs *fileFS) observe(op metrics.Op, n int64, start time.Time, err error) {
	if fs.m == nil {
		return
	}
	if err != nil {
		fs.m.IOError(op)
		return
	}
	fs.m.ObserveIO(op, n, time.Since(start))
}

func (fs *fileFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if in.NodeId != fileID {
		return nil, fuse.EISDIR
	}
	off, size := int64(in.Offset), fs.size.Load()
	if off >= size {
		return fuse.ReadResultData(nil), fuse.OK // end of file
	}
	n := min(int64(in.Size), int64(len(buf)), size-off)
	start := time.Now()
	err := fs.readAt(buf[:n], off)
	fs.observe(metrics.OpRead, n, start, err)
	if err != nil {
		return nil, errStatus(err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

func (fs *fileFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if in.NodeId != fileID {
		return 0, fuse.EISDIR
	}
	if fs.readOnly {
		return 0, fuse.EROFS
	}
	off, size := int64(in.Offset), fs.size.Load()
	if off >= size && len(data) > 0 {
		return 0, fuse.Status(syscall.ENOSPC)
	}
	n := min(int64(len(data)), size-off) // short write at the end
	// The kernel passes the file's flags plus O_DSYNC/O_SYNC of the
	// individual write (RWF_DSYNC, O_DSYNC files).
	fua := in.Flags&(syscall.O_DSYNC|syscall.O_SYNC) != 0
	start := time.Now()
	err := fs.writeAt(data[:n], off, fua)
	fs.observe(metrics.OpWrite, n, start, err)
	if err != nil {
		return 0, errStatus(err)
	}
	return uint32(n), fuse.OK
}

// Writev gathers a WRITE payload split over several buffers.
func (fs *fileFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if len(data) == 1 {
		return fs.Write(cancel, in, data[0])
	}
	total := 0
	for _, d := range data {
		total += len(d)
	}
	bp, _ := fs.gather.Get().(*[]byte)
	if bp == nil || cap(*bp) < total {
		b := make([]byte, total)
		bp = &b
	}
	b := (*bp)[:0]
	for _, d := range data {
		b = append(b, d...)
	}
	n, st := fs.Write(cancel, in, b)
	fs.gather.Put(bp)
	return n, st
}

// Fsync makes every acknowledged write durable.
func (fs *fileFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	err := fs.b.Flush()
	fs.observe(metrics.OpFlush, 0, start, err)
	if err != nil {
		return errStatus(err)
	}
	return fuse.OK
}

// Flush is sent on close(2). Writes are with the Backend already and close
// promises no durability, so there is nothing to do.
func (fs *fileFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status { return fuse.OK }

func (fs *fileFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {}

// Fallocate: PUNCH_HOLE (the loop driver's discard) zeroes and may
// deallocate; ZERO_RANGE and WRITE_ZEROES zero keeping the range
// provisioned; plain allocation inside the file is a no-op. Nothing may
// change the size (EFBIG) and other modes are unsupported.
func (fs *fileFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if in.NodeId != fileID {
		return fuse.EISDIR
	}
	off, length, mode := int64(in.Offset), int64(in.Length), in.Mode
	if off < 0 || length <= 0 || off+length < off {
		return fuse.EINVAL
	}
	keep := mode&fallocKeepSize != 0
	if size := fs.size.Load(); off+length > size {
		if !keep {
			return fuse.Status(syscall.EFBIG)
		}
		length = max(size-off, 0)
	}
	var op metrics.Op
	trim := false
	switch mode &^ fallocKeepSize {
	case 0:
		return fuse.OK // the whole file is allocated
	case fallocPunchHole:
		if !keep {
			return fuse.EINVAL // as the kernel requires
		}
		op, trim = metrics.OpDiscard, true
	case fallocZeroRange, fallocWriteZeroes:
		op = metrics.OpWriteZeroes
	default:
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	if fs.readOnly {
		return fuse.EROFS
	}
	if length == 0 {
		return fuse.OK
	}
	start := time.Now()
	err := fs.zeroAt(off, length, trim)
	fs.observe(op, length, start, err)
	if err != nil {
		return errStatus(err)
	}
	return fuse.OK
}

// readAt reads p at off (inside the file), splitting at block boundaries
// and at the Backend's maximum request.
func (fs *fileFS) readAt(p []byte, off int64) error {
	for len(p) > 0 {
		if r := off % fs.blk; r != 0 || int64(len(p)) < fs.blk {
			// Partial block: read the block, copy the part.
			s := fs.scratch.Get().([]byte)
			_, err := fs.b.ReadAt(s, off-r)
			n := copy(p, s[r:])
			fs.scratch.Put(s)
			if err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
			continue
		}
		n := min(int64(len(p))&^(fs.blk-1), fs.max)
		if _, err := fs.b.ReadAt(p[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// writeAt writes p at off (inside the file). Partial blocks are read,
// modified and written back under the exclusive rmw lock.
func (fs *fileFS) writeAt(p []byte, off int64, fua bool) error {
	write := fs.b.WriteAt
	if fua {
		write = fs.b.WriteAtFUA
	}
	if fs.blk == 1 {
		return fs.chunks(p, off, write)
	}
	aligned := off%fs.blk == 0 && int64(len(p))%fs.blk == 0
	if aligned {
		fs.rmw.RLock()
		defer fs.rmw.RUnlock()
		return fs.chunks(p, off, write)
	}
	fs.rmw.Lock()
	defer fs.rmw.Unlock()
	for len(p) > 0 {
		if r := off % fs.blk; r != 0 || int64(len(p)) < fs.blk {
			s := fs.scratch.Get().([]byte)
			_, err := fs.b.ReadAt(s, off-r)
			n := copy(s[r:], p)
			if err == nil {
				_, err = write(s, off-r)
			}
			fs.scratch.Put(s)
			if err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
			continue
		}
		n := int64(len(p)) &^ (fs.blk - 1)
		if err := fs.chunks(p[:n], off, write); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// chunks writes aligned p in pieces of at most fs.max bytes.
func (fs *fileFS) chunks(p []byte, off int64, write func([]byte, int64) (int, error)) error {
	for len(p) > 0 {
		n := min(int64(len(p)), fs.max)
		if _, err := write(p[:n], off); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// zeroAt zeroes [off, off+length): whole blocks with WriteZeroes, partial
// blocks at the edges by read-modify-write.
func (fs *fileFS) zeroAt(off, length int64, trim bool) error {
	end := off + length
	head := min((off+fs.blk-1)&^(fs.blk-1), end) // first block boundary
	tail := max(end&^(fs.blk-1), head)           // last block boundary
	if head > off || end > tail {
		fs.rmw.Lock()
		defer fs.rmw.Unlock()
		for _, r := range [][2]int64{{off, head}, {tail, end}} {
			if r[1] <= r[0] {
				continue
			}
			s := fs.scratch.Get().([]byte)
			base := r[0] &^ (fs.blk - 1)
			_, err := fs.b.ReadAt(s, base)
			clear(s[r[0]-base : r[1]-base])
			if err == nil {
				_, err = fs.b.WriteAt(s, base)
			}
			fs.scratch.Put(s)
			if err != nil {
				return err
			}
		}
	} else {
		fs.rmw.RLock()
		defer fs.rmw.RUnlock()
	}
	if tail > head {
		return fs.b.WriteZeroes(head, tail-head, trim)
	}
	return nil
}
