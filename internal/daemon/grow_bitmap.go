package daemon

import (
	"errors"
	"strings"

	"mdtool/bitmap"
	"mdtool/engine"
	"mdtool/internal/mdadm/plan"
)

// OpGrowBitmap adds (Bitmap "internal") or removes (Bitmap "none") the
// write-intent bitmap of the running array (mdadm --grow --bitmap).
// BitmapChunk is --bitmap-chunk in bytes, 0 for mdadm's choice.
const OpGrowBitmap = "grow-bitmap"

// Error codes of OpGrowBitmap, worded by cmd as mdadm's Grow_addbitmap.
const (
	CodeBitmapPresent = "bitmap-present" // "bitmap already present on DEV"
	CodeNoBitmap      = "no-bitmap"      // "no bitmap found on DEV"
	CodeBitmapLevel   = "bitmap-level"   // "Bitmaps not meaningful with level L"
	CodeBitmapChunk   = "bitmap-chunk"   // "failed to create internal bitmap - chunksize problem."
	CodeNoSuperblock  = "no-superblock"  // "failed to load super-block." (an array without superblocks)
)

// manageResponse runs a manage-type request through the handler and makes
// the response.
func (s *Server) manageResponse(req Request) Response {
	resp, err := s.h.Manage(req)
	if err != nil {
		return errResponse(err)
	}
	if resp == nil {
		resp = &Response{}
	}
	resp.OK = true
	return *resp
}

// growBitmap is OpGrowBitmap: mdadm's Grow_addbitmap with the kernel's
// location_store behind it.
func (s *Service) growBitmap(req Request) error {
	a := s.cfg.Array
	if s.cfg.ReadOnly {
		return Errorf(CodeReadOnly, "the array is read-only")
	}
	switch req.Bitmap {
	case "none":
		if !a.HasBitmap() {
			return Errorf(CodeNoBitmap, "no bitmap found")
		}
		if err := a.RemoveBitmap(); err != nil {
			return growBitmapError(err)
		}
		s.cfg.Logf("md: bitmap removed")
		return nil
	case "internal":
	default:
		if strings.HasPrefix(req.Bitmap, "/") {
			return s.growBitmapFile(req.Bitmap) // bitmapfile.go
		}
		return Errorf(CodeInvalid, "bitmap must be internal or none, not %q", req.Bitmap)
	}
	if a.HasBitmap() {
		return Errorf(CodeBitmapPresent, "bitmap already present")
	}
	if !a.Persistent() {
		// mdadm 4.2 checks the level (GET_ARRAY_INFO), then its
		// load_super of the first in-sync member fails: nothing is
		// written to a member that has no superblock
		if g := a.Geometry(); g.Level() <= 0 {
			return Errorf(CodeBitmapLevel, "bitmaps not meaningful with level %d", g.Level())
		}
		return Errorf(CodeNoSuperblock, "failed to load super-block")
	}
	// add_internal_bitmap1 on every in-sync member, as mdadm loops over
	// them; the last one's offset is what goes to bitmap/location.
	var offset int32
	var hdr bitmap.Header
	found := false
	for _, mi := range a.Members() {
		if mi.Role < 0 || mi.State != engine.InSync || mi.Device < 0 {
			continue
		}
		spec := s.spec(mi.Device)
		sb, _, err := readSuper(&spec)
		if err != nil {
			return Errorf(CodeFailed, "failed to load super-block: %v", err)
		}
		o, h, err := growBitmapPlan(&spec, sb, req.BitmapChunk)
		switch {
		case errors.Is(err, plan.ErrBitmapLevel):
			return Errorf(CodeBitmapLevel, "bitmaps not meaningful with level %d", sb.Level)
		case err != nil:
			return Errorf(CodeBitmapChunk, "failed to create internal bitmap - chunksize problem: %v", err)
		}
		offset, hdr, found = o, h, true
	}
	if !found {
		return Errorf(CodeFailed, "no in-sync member")
	}
	if req.BitmapDelay != 0 {
		hdr.DaemonSleep = req.BitmapDelay // add_internal_bitmap's delay
	}
	if err := a.AddBitmap(offset, hdr); err != nil {
		return growBitmapError(err)
	}
	s.cfg.Logf("md: internal bitmap added at %+d sectors, chunk %d KiB", offset, hdr.ChunkSize>>10)
	return nil
}

func growBitmapError(err error) error {
	switch {
	case errors.Is(err, engine.ErrBitmapPresent):
		return Errorf(CodeBitmapPresent, "%v", err)
	case errors.Is(err, engine.ErrNoBitmap):
		return Errorf(CodeNoBitmap, "%v", err)
	}
	return engineError(err)
}
