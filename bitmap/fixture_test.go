package bitmap

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"mdtool/internal/fixture"
)

// fixtureBitmap is the internal bitmap of one fixture member, located with
// hand-decoded v1.x superblock fields (this package does not depend on the
// superblock package): feature_map bit 0 at sb+0x08, set_uuid at sb+0x10,
// bitmap_offset (signed sectors from the superblock) at sb+0x60, events
// at sb+0xC8.
type fixtureBitmap struct {
	c       *fixture.Case
	m       *fixture.Member
	im      *fixture.Image
	at      int64 // byte offset of the bitmap header on the member
	offset  int32 // bitmap_offset
	uuid    [16]byte
	events  uint64
	storage []byte // from the header to the end of one page (or the image)
}

// fixtureBitmaps returns every member with an internal bitmap in
// ../testdata/fixtures (none when the fixtures are absent).
func fixtureBitmaps(t testing.TB) []fixtureBitmap {
	dirs, _ := filepath.Glob("../testdata/fixtures/*/case.json")
	var out []fixtureBitmap
	for _, d := range dirs {
		c, err := fixture.LoadCase(filepath.Dir(d))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if c.Metadata == "0.90" {
			continue
		}
		for i := range c.Members {
			m := &c.Members[i]
			if m.Super.Version == "" {
				continue
			}
			im, err := c.Image(i)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.Name, m.Name, err)
			}
			sb := make([]byte, 256)
			if _, err := im.ReadAt(sb, m.Super.Offset); err != nil {
				t.Fatalf("%s/%s: %v", c.Name, m.Name, err)
			}
			if binary.LittleEndian.Uint32(sb[8:])&1 == 0 {
				continue // no bitmap
			}
			fb := fixtureBitmap{c: c, m: m, im: im,
				offset: int32(binary.LittleEndian.Uint32(sb[0x60:])),
				events: binary.LittleEndian.Uint64(sb[0xc8:])}
			copy(fb.uuid[:], sb[0x10:0x20])
			fb.at = m.Super.Offset + int64(fb.offset)*512
			fb.storage = make([]byte, min(int64(PageSize)*64, im.Size-fb.at))
			if _, err := im.ReadAt(fb.storage, fb.at); err != nil {
				t.Fatalf("%s/%s: %v", c.Name, m.Name, err)
			}
			out = append(out, fb)
		}
	}
	return out
}

var examineState = regexp.MustCompile(`(?m)^ +State : (.*)$`)

// TestFixtureBitmaps checks every bitmap that the real mdadm 4.2 and Linux
// 6.1 wrote in the fixtures: Parse accepts it, CheckFor agrees with the
// -X "State" line, ExamineCounts gives -X's "Bitmap :" numbers, and the
// bytes after the bits up to mdadm's padding boundary are still 0xff as
// NewArea writes them.
func TestFixtureBitmaps(t *testing.T) {
	fbs := fixtureBitmaps(t)
	for _, fb := range fbs {
		t.Run(fb.c.Name+"/"+fb.m.Name, func(t *testing.T) {
			h, err := Parse(fb.storage)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if fb.m.ExamineBitmap == "" {
				t.Fatalf("member has a bitmap but no examine-bitmap capture")
			}
			x, err := fb.c.ReadFile(fb.m.ExamineBitmap)
			if err != nil {
				t.Fatal(err)
			}
			m := bitmapLine.FindSubmatch(x)
			if m == nil {
				t.Fatalf("no Bitmap line in %s", fb.m.ExamineBitmap)
			}
			total, dirty := ExamineCounts(h, fb.storage)
			if got := []string{string(m[1]), string(m[2])}; got[0] != strconv.FormatUint(total, 10) || got[1] != strconv.FormatUint(dirty, 10) {
				t.Errorf("-X says %s bits %s dirty; ExamineCounts %d %d", got[0], got[1], total, dirty)
			}
			st := examineState.FindSubmatch(x)
			err = h.CheckFor(fb.uuid, fb.events)
			var se *StaleError
			switch {
			case st == nil:
				t.Errorf("no State line")
			case string(st[1]) == "OK" && err != nil:
				t.Errorf("-X State OK, CheckFor: %v", err)
			case string(st[1]) == "Out of date" && !errors.As(err, &se):
				t.Errorf("-X State Out of date, CheckFor: %v", err)
			}
			end := AreaSize(h, AreaAlign(fb.offset))
			for i := h.Bytes(); i < end && i < uint64(len(fb.storage)); i++ {
				if fb.storage[i] != 0xff {
					t.Fatalf("padding byte %d of %d = %#x, want 0xff", i, end, fb.storage[i])
				}
			}
			// Bits past the last chunk in the last byte stay set too.
			if r := h.Chunks() % 8; r != 0 {
				last := fb.storage[h.Bytes()-1]
				if last>>r != 0xff>>r {
					t.Errorf("last bits byte %#x: bits past chunk %d not set", last, h.Chunks())
				}
			}
		})
	}
	t.Logf("%d fixture bitmaps checked", len(fbs))
}
