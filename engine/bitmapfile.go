package engine

// External write-intent bitmap files (mdadm --bitmap=FILE; md's
// bitmap_info.file): the bitmap superblock at offset 0 of the file, the
// bits right after it, written through the same runtime (engine/wib) as
// an internal bitmap. The superblocks then carry no bitmap: md's
// super_1_sync/super_90_sync record only a bitmap that is not a file.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"mdtool/bitmap"
	"mdtool/engine/wib"
)

// ErrBitmapFileResize: md_bitmap_resize refuses a bitmap file ("cannot
// resize file-based bitmap", EINVAL), so a size change is refused.
var ErrBitmapFileResize = fmt.Errorf("%w: cannot resize file-based bitmap", ErrUnsupported)

// ErrBitmapFileShort: the file ends before the bits its header counts.
var ErrBitmapFileShort = errors.New("engine: bitmap file is too short")

// fileTarget is the runtime's target for a bitmap file: one "member",
// the file, written durably and never beyond its end (md writes the
// file's own blocks; its size does not change).
type fileTarget struct {
	f    *os.File
	size int64
}

func (t fileTarget) WriteBitmap(_ int, off int64, p []byte) error {
	if off >= t.size {
		return nil
	}
	if end := off + int64(len(p)); end > t.size {
		p = p[:t.size-off]
	}
	if _, err := t.f.WriteAt(p, off); err != nil {
		return err
	}
	return t.f.Sync()
}

func (t fileTarget) Members() []wib.MemberGeom {
	return []wib.MemberGeom{{Index: 0, LogicalBlock: 512, PhysicalBlock: 512,
		BitmapStart: 0, Limit: (t.size + 511) &^ 511}}
}

// wibTarget is where the runtime writes: the bitmap file, or the members.
func (a *Array) wibTarget() wib.Target {
	if f := a.bmFile; f != nil {
		st, err := f.Stat()
		if err == nil {
			return fileTarget{f: f, size: st.Size()}
		}
	}
	return bitmapTarget{a}
}

// readBitmapFile reads a bitmap file's header and bits (md_bitmap_read_sb
// and md_bitmap_init_from_disk on bitmap_info.file).
func readBitmapFile(f *os.File) (*bitmap.Header, []byte, error) {
	head := make([]byte, bitmap.HeaderSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, ErrBitmapFileShort
		}
		return nil, nil, err
	}
	h, err := bitmap.Parse(head)
	if err != nil {
		return nil, nil, err
	}
	bits := make([]byte, (h.Chunks()+7)/8)
	if _, err := f.ReadAt(bits, bitmap.HeaderSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, ErrBitmapFileShort
		}
		return nil, nil, err
	}
	return h, bits, nil
}

// openFileBitmap starts the runtime on Options.BitmapFile (mdadm
// --assemble --bitmap=FILE: SET_BITMAP_FILE before RUN_ARRAY). Given a
// file, md's super_1_validate/super_90_validate ignore an internal bitmap
// (bitmap_info.file set), and the superblocks written next drop it.
func (a *Array) openFileBitmap() error {
	f := a.opts.BitmapFile
	switch {
	case f == nil:
		return nil
	case !a.redundant():
		return fmt.Errorf("%w: a bitmap file on an array without redundancy", ErrUnsupported)
	}
	h, bits, err := readBitmapFile(f)
	if err == nil {
		err = a.checkBitmapFileSize(f, h) // build_bitmap.go
	}
	if err != nil {
		return fmt.Errorf("engine: bitmap file %s: %w", f.Name(), err)
	}
	a.bmFile = f
	a.hasBM = true
	rt, err := a.newWIB(h, bits)
	if err != nil {
		a.bmFile, a.hasBM = nil, false
		return err
	}
	a.bm = rt
	return nil
}

// BitmapFile is the path of the array's bitmap file ("" when its bitmap
// is internal or it has none): -D's "Intent Bitmap : PATH".
func (a *Array) BitmapFile() string {
	a.bmMu.RLock()
	defer a.bmMu.RUnlock()
	if a.bmFile == nil {
		return ""
	}
	return a.bmFile.Name()
}

// AddBitmapFile makes f, a bitmap file mdadm's CreateBitmap wrote for
// this array, the array's bitmap while it runs (mdadm --grow
// --bitmap=FILE: SET_BITMAP_FILE on an active array). The file is read
// and loaded as md_bitmap_create/load do (out of date: every bit set,
// events brought to the array's); the superblocks still record no bitmap.
func (a *Array) AddBitmapFile(f *os.File) error {
	if a.journaled() {
		return ErrJournaled
	}
	release, err := a.beginBitmapChange()
	if err != nil {
		return err
	}
	defer release()
	if a.HasBitmap() {
		return ErrBitmapPresent
	}
	if !a.redundant() {
		return fmt.Errorf("%w: a bitmap file on an array without redundancy", ErrUnsupported)
	}
	h, bits, err := readBitmapFile(f)
	if err != nil {
		return fmt.Errorf("engine: bitmap file %s: %w", f.Name(), err)
	}
	a.suspend()
	defer a.resume()
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if err := h.CheckFor(a.bitmapUUID(), a.meta.events); err != nil && !errors.As(err, new(*bitmap.StaleError)) {
		return fmt.Errorf("engine: bitmap file %s: %w", f.Name(), err)
	}
	a.bmMu.Lock()
	a.bmFile = f
	a.bmMu.Unlock()
	rt, err := a.startAddedBitmap(h, bits)
	if err != nil {
		a.bmMu.Lock()
		a.bmFile = nil
		a.bmMu.Unlock()
		return err
	}
	a.bmMu.Lock()
	a.bm = rt
	a.hasBM = true
	a.bmMu.Unlock()
	// md's set_bitmap_file writes no md superblock (nothing in it
	// changes): the events stay; md_bitmap_load ends with
	// md_bitmap_update_sb, which stamps them into the file.
	return rt.SetEvents(a.meta.events, a.degraded() > 0)
}
