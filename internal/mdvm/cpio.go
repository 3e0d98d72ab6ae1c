package mdvm

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

// archive is an initramfs under construction: paths (without a leading
// slash) to entries, written as a "newc" cpio archive, the format the
// kernel unpacks into its rootfs.
type archive struct {
	ents map[string]entry
}

type entry struct {
	mode uint32 // file type and permission bits
	data []byte // file contents or symlink target
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
)

func newArchive() *archive { return &archive{ents: map[string]entry{}} }

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// dir adds a directory and its parents.
func (a *archive) dir(p string) {
	p = clean(p)
	for p != "" && p != "." {
		if _, ok := a.ents[p]; ok {
			return
		}
		a.ents[p] = entry{mode: sIFDIR | 0o755}
		p = path.Dir(p)
		if p == "." {
			return
		}
	}
}

// file adds a regular file (and its parent directories).
func (a *archive) file(p string, perm uint32, data []byte) {
	p = clean(p)
	a.dir(path.Dir(p))
	a.ents[p] = entry{mode: sIFREG | perm, data: data}
}

// symlink adds a symbolic link p -> target.
func (a *archive) symlink(p, target string) {
	p = clean(p)
	a.dir(path.Dir(p))
	a.ents[p] = entry{mode: sIFLNK | 0o777, data: []byte(target)}
}

func (a *archive) has(p string) bool {
	_, ok := a.ents[clean(p)]
	return ok
}

// writeTo writes the archive in newc format, sorted by path so that every
// directory comes before what it holds and equal inputs give equal bytes.
func (a *archive) writeTo(w io.Writer) error {
	names := make([]string, 0, len(a.ents))
	for n := range a.ents {
		names = append(names, n)
	}
	sort.Strings(names)
	ino := 1
	for _, n := range names {
		if err := writeCpioEntry(w, ino, n, a.ents[n]); err != nil {
			return err
		}
		ino++
	}
	return writeCpioEntry(w, 0, "TRAILER!!!", entry{})
}

func writeCpioEntry(w io.Writer, ino int, name string, e entry) error {
	nlink := 1
	if e.mode&0o170000 == sIFDIR {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize (with the NUL), check
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, 0, 0, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+8+len(e.data)+4)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	for len(buf)%4 != 0 {
		buf = append(buf, 0)
	}
	buf = append(buf, e.data...)
	for len(buf)%4 != 0 {
		buf = append(buf, 0)
	}
	_, err := w.Write(buf)
	return err
}
