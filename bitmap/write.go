package bitmap

import (
	"errors"
	"fmt"
)

// WriteRule selects which kernel's bitmap page write sizing
// [WriteGeometry.PageWriteSize] reproduces. The zero value is the newest.
//
// History of __write_sb_page/write_sb_page in drivers/md/md-bitmap.c:
//
//   - Linux <= 6.3 (so Debian 12's 6.1): every page is written as 4096
//     bytes except the last, which is roundup(last_page_size,
//     logical_block_size); the write must not run into data (1.1/1.2) or
//     into the superblock (1.0, bitmap before it), else -EINVAL.
//   - Linux 6.4 (commit 8745faa95611, "md: Use optimal I/O size for last
//     bitmap page", Jon Derrick, 2023): the last page is instead written as
//     roundup(last_page_size, io_opt) when io_opt > logical_block_size and
//     that still ends before the boundary (bitmap_io_size()); else as
//     before. (6.5 moved this into __write_sb_page, same arithmetic.)
//   - Linux 6.11 (commit ab99a87542f1, "md/md-bitmap: fix writing non bitmap
//     pages", Ofir Gal, 2024): the size is capped at bitmap_limit =
//     (file_pages - pg_index) << PAGE_SHIFT, so an io_opt-sized write never
//     covers memory beyond the bitmap's pages; for the last page that is
//     4096 bytes.
type WriteRule int

const (
	// RuleLatest is Linux >= 6.11: io_opt expansion plus the bitmap_limit cap.
	RuleLatest WriteRule = iota
	// RuleLinux64 is Linux 6.4 .. 6.10: io_opt expansion, no cap.
	RuleLinux64
	// RuleLinux61 is Linux <= 6.3, including the reference 6.1: logical
	// block rounding only, io_opt ignored.
	RuleLinux61
)

// String names the rule.
func (r WriteRule) String() string {
	switch r {
	case RuleLatest:
		return "linux>=6.11"
	case RuleLinux64:
		return "linux6.4-6.10"
	case RuleLinux61:
		return "linux<=6.3"
	}
	return fmt.Sprintf("WriteRule(%d)", int(r))
}

// Placement is where the bitmap lies relative to the superblock and the
// data on a member, as the kernel classifies it (names from its comments).
type Placement int

const (
	// MetadataBitmapData: superblock before data, bitmap after the
	// superblock (1.1, 1.2). Writes must end at or before the data offset.
	MetadataBitmapData Placement = iota
	// DataBitmapMetadata: negative bitmap offset, bitmap before the
	// superblock (1.0 as mdadm creates it). Writes must end at or before
	// the superblock, and the data must end at or before the bitmap.
	DataBitmapMetadata
	// DataMetadataBitmap: superblock after data, bitmap after the
	// superblock (1.0 with a positive offset). The kernel checks nothing.
	DataMetadataBitmap
)

// String names the placement like the kernel comments do.
func (p Placement) String() string {
	switch p {
	case MetadataBitmapData:
		return "METADATA BITMAP DATA"
	case DataBitmapMetadata:
		return "DATA BITMAP METADATA"
	case DataMetadataBitmap:
		return "DATA METADATA BITMAP"
	}
	return fmt.Sprintf("Placement(%d)", int(p))
}

// ErrNoFit is the sentinel of [FitError]: the kernel refuses the write
// (-EINVAL, which sets BITMAP_WRITE_ERROR and disables the bitmap).
var ErrNoFit = errors.New("bitmap: bitmap write does not fit")

// ErrGeometry is returned for an unusable [WriteGeometry] (block sizes that
// are not powers of two >= 512, a page beyond the bitmap, ...).
var ErrGeometry = errors.New("bitmap: bad write geometry")

// FitError says which page could not be written and why, in the kernel's
// words ("bitmap runs in to data", "bitmap runs in to metadata", "data runs
// in to bitmap"). It unwraps to [ErrNoFit].
type FitError struct {
	Page uint64
	Msg  string
}

// Error describes the refused write.
func (e *FitError) Error() string {
	return fmt.Sprintf("bitmap: page %d: %s", e.Page, e.Msg)
}

// Unwrap returns [ErrNoFit].
func (e *FitError) Unwrap() error { return ErrNoFit }

// WriteGeometry is what the kernel's bitmap page writer looks at for one
// member device. Sectors are 512 bytes, counted from the start of the
// member device.
type WriteGeometry struct {
	// StorageBytes is header plus bits ([Header.Bytes]): store->bytes.
	StorageBytes uint64
	// SuperStart is the superblock's sector (rdev->sb_start).
	SuperStart uint64
	// Offset is the bitmap's start relative to SuperStart, in sectors
	// (signed bitmap_offset, mddev->bitmap_info.offset).
	Offset int64
	// DataOffset is the data start (rdev->data_offset), sectors.
	DataOffset uint64
	// DataSectors is the data size per member (mddev->dev_sectors),
	// sectors; used only for DataBitmapMetadata.
	DataSectors uint64
	// LogicalBlock is the device's logical block size in bytes.
	LogicalBlock uint32
	// PhysicalBlock is the device's physical block size in bytes. It
	// stands in for IOOpt when IOOpt is 0 (mdtool's engine policy: avoid
	// read-modify-write on 512e drives). The kernel has no such fallback;
	// to reproduce it exactly leave this 0.
	PhysicalBlock uint32
	// IOOpt is the device's optimal I/O size in bytes, 0 when unknown.
	IOOpt uint32
	// Rule selects the kernel behaviour for whole-page writes.
	Rule WriteRule
}

// OptimalIO returns the io_opt used for expansion: IOOpt, or PhysicalBlock
// when IOOpt is 0.
func (g *WriteGeometry) OptimalIO() uint64 {
	if g.IOOpt != 0 {
		return uint64(g.IOOpt)
	}
	return uint64(g.PhysicalBlock)
}

// FilePages returns the number of 4 KiB bitmap pages (store->file_pages).
func (g *WriteGeometry) FilePages() uint64 { return FilePages(g.StorageBytes) }

// Placement classifies the geometry like the kernel: a negative Offset is
// DataBitmapMetadata, else a superblock before the data is
// MetadataBitmapData, else DataMetadataBitmap.
func (g *WriteGeometry) Placement() Placement {
	switch {
	case g.Offset < 0:
		return DataBitmapMetadata
	case g.SuperStart < g.DataOffset:
		return MetadataBitmapData
	}
	return DataMetadataBitmap
}

// Start returns the bitmap's first sector on the device: SuperStart+Offset.
func (g *WriteGeometry) Start() int64 { return int64(g.SuperStart) + g.Offset }

// Boundary returns the sector a bitmap write must not go beyond, and
// whether there is one: the data offset for MetadataBitmapData, the
// superblock for DataBitmapMetadata, none for DataMetadataBitmap.
func (g *WriteGeometry) Boundary() (sector int64, ok bool) {
	switch g.Placement() {
	case MetadataBitmapData:
		return int64(g.DataOffset), true
	case DataBitmapMetadata:
		return int64(g.SuperStart), true
	}
	return 0, false
}

func (g *WriteGeometry) check() error {
	l := g.LogicalBlock
	if l < 512 || l&(l-1) != 0 {
		return fmt.Errorf("%w: logical block size %d", ErrGeometry, l)
	}
	if p := g.PhysicalBlock; p != 0 && (p < 512 || p&(p-1) != 0) {
		return fmt.Errorf("%w: physical block size %d", ErrGeometry, p)
	}
	if g.StorageBytes < HeaderSize {
		return fmt.Errorf("%w: bitmap of %d bytes", ErrGeometry, g.StorageBytes)
	}
	return nil
}

// dataInBitmap reports the DataBitmapMetadata refusal "data runs in to
// bitmap": data_offset + dev_sectors > sb_start + offset.
func (g *WriteGeometry) dataInBitmap() bool {
	return g.Placement() == DataBitmapMetadata &&
		int64(g.DataOffset+g.DataSectors) > g.Start()
}

// fits reports whether a write of n bytes starting at byte off of the
// bitmap storage stays within the boundary. Like the kernel it compares
// whole sectors (n/512, rounded down).
func (g *WriteGeometry) fits(off, n uint64) bool {
	b, ok := g.Boundary()
	if !ok {
		return true
	}
	return g.Start()+int64(off/512)+int64(n/512) <= b
}

func roundUp(x, y uint64) uint64 { return (x + y - 1) / y * y }

// PageWriteSize returns how many bytes the kernel writes for bitmap page
// pg (counted from the header's page, 0-based), following g.Rule (see
// [WriteRule] for which kernel does what):
//
//	size = 4096; for the last page: last = StorageBytes % 4096 (0 means 4096),
//	       size = roundup(last, LogicalBlock)
//	opt  = roundup(last, io_opt) for the last page if io_opt > LogicalBlock
//	       (not under RuleLinux61; io_opt is [WriteGeometry.OptimalIO])
//	MetadataBitmapData / DataBitmapMetadata: opt if the write ends at or
//	       before the boundary, else size if that does, else *FitError;
//	       DataBitmapMetadata also fails when the data ends after the bitmap
//	       start; DataMetadataBitmap: size, unchecked
//	RuleLatest: min(result, (FilePages - pg) * 4096)
//
// The write starts at byte pg*4096 of the storage.
func (g *WriteGeometry) PageWriteSize(pg uint64) (uint64, error) {
	if err := g.check(); err != nil {
		return 0, err
	}
	pages := g.FilePages()
	if pg >= pages {
		return 0, fmt.Errorf("%w: page %d of %d", ErrGeometry, pg, pages)
	}
	size, opt := uint64(PageSize), uint64(PageSize)
	if pg == pages-1 {
		last := g.StorageBytes & (PageSize - 1)
		if last == 0 {
			last = PageSize
		}
		size = roundUp(last, uint64(g.LogicalBlock))
		opt = size
		if io := g.OptimalIO(); g.Rule != RuleLinux61 && io > uint64(g.LogicalBlock) {
			opt = roundUp(last, io)
		}
	}
	off := pg * PageSize
	switch g.Placement() {
	case DataBitmapMetadata, MetadataBitmapData:
		msg := "bitmap runs in to data"
		if g.Placement() == DataBitmapMetadata {
			msg = "bitmap runs in to metadata"
		}
		switch {
		case opt != size && g.fits(off, opt):
			size = opt
		case g.fits(off, size):
		default:
			return 0, &FitError{Page: pg, Msg: msg}
		}
		if g.dataInBitmap() {
			return 0, &FitError{Page: pg, Msg: "data runs in to bitmap"}
		}
	}
	if g.Rule == RuleLatest {
		if limit := (pages - pg) * PageSize; size > limit {
			size = limit
		}
	}
	return size, nil
}
