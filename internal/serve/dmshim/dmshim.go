// Package dmshim carries an array's I/O geometry (minimum_io_size = the
// chunk, optimal_io_size = the full stripe) to a door that cannot say it
// (NBD carries no hints; ublk only powers of two), through a
// device-mapper "striped" device on top of the door's device.
//
// dm-stripe announces io_min = chunk and io_opt = chunk × stripes, and the
// block layer's stacking keeps them. Its mapping sends device address
// A = (c·S + k)·chunk + r (stripe k, chunk c of the stripe, r inside the
// chunk) to address k·W + c·chunk + r of its one underlying device, where
// W is a stripe's length. The door therefore serves the array through the
// inverse permutation (Backend): door address P = k·W + c·chunk + r is
// array address (c·S + k)·chunk + r, so that the dm device is the array,
// address for address. What a whole number of full stripes does not
// cover (the tail) is mapped linearly on both sides.
package dmshim

import (
	"fmt"

	"mdtool/internal/serve/export"
)

// Geometry is the shape of the striped mapping.
type Geometry struct {
	Size    int64 // the array's (and the door's) size in bytes
	Chunk   int64 // bytes; a multiple of 512
	Stripes int64 // full stripe / chunk
}

// Width is the length of one stripe (W): the full stripes that fit, in
// chunks per stripe, times the chunk.
func (g Geometry) Width() int64 {
	if g.Chunk <= 0 || g.Stripes <= 0 {
		return 0
	}
	return g.Size / (g.Chunk * g.Stripes) * g.Chunk
}

// Striped is the part of the device that the striped target maps (S·W);
// the rest, up to Size, is the linear tail.
func (g Geometry) Striped() int64 { return g.Width() * g.Stripes }

// Valid says whether the geometry can be mapped: a chunk of whole
// sectors and at least one full stripe.
func (g Geometry) Valid() bool {
	return g.Chunk > 0 && g.Chunk%512 == 0 && g.Stripes > 0 && g.Size%512 == 0 && g.Width() > 0
}

// ToArray is the array address of door address p and how many bytes from
// p on stay contiguous in the array (to the end of p's chunk; the tail,
// also beyond Size should the array grow, is the identity).
func (g Geometry) ToArray(p int64) (a, run int64) {
	w := g.Width()
	if p >= w*g.Stripes {
		return p, 1 << 62
	}
	k, rem := p/w, p%w
	c, r := rem/g.Chunk, rem%g.Chunk
	return (c*g.Stripes+k)*g.Chunk + r, g.Chunk - r
}

// Backend serves an array Backend at the door's addresses.
type Backend struct {
	b export.Backend
	g Geometry
}

var _ export.Backend = (*Backend)(nil)

// NewBackend permutes b by g (g.Size must be b's size).
func NewBackend(b export.Backend, g Geometry) (*Backend, error) {
	if !g.Valid() || g.Size != b.Size() {
		return nil, fmt.Errorf("dmshim: geometry %+v does not fit a device of %d bytes", g, b.Size())
	}
	return &Backend{b: b, g: g}, nil
}

// Geometry is the permutation's geometry.
func (s *Backend) Geometry() Geometry { return s.g }

// ReadAt reads door range [off, off+len(p)), piece by piece.
func (s *Backend) ReadAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		a, run := s.g.ToArray(off + int64(done))
		l := int(min(run, int64(len(p)-done)))
		n, err := s.b.ReadAt(p[done:done+l], a)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// WriteAt writes door range [off, off+len(p)).
func (s *Backend) WriteAt(p []byte, off int64) (int, error) {
	return s.write(p, off, false)
}

// WriteAtFUA writes durably.
func (s *Backend) WriteAtFUA(p []byte, off int64) (int, error) {
	return s.write(p, off, true)
}

func (s *Backend) write(p []byte, off int64, fua bool) (int, error) {
	done := 0
	for done < len(p) {
		a, run := s.g.ToArray(off + int64(done))
		l := int(min(run, int64(len(p)-done)))
		var n int
		var err error
		if fua {
			n, err = s.b.WriteAtFUA(p[done:done+l], a)
		} else {
			n, err = s.b.WriteAt(p[done:done+l], a)
		}
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Flush flushes the array.
func (s *Backend) Flush() error { return s.b.Flush() }

// Discard discards the array pieces of the door range.
func (s *Backend) Discard(off, length int64) error {
	for at := int64(0); at < length; {
		a, run := s.g.ToArray(off + at)
		l := min(run, length-at)
		if err := s.b.Discard(a, l); err != nil {
			return err
		}
		at += l
	}
	return nil
}

// WriteZeroes zeroes the array pieces of the door range.
func (s *Backend) WriteZeroes(off, length int64, mayTrim bool) error {
	for at := int64(0); at < length; {
		a, run := s.g.ToArray(off + at)
		l := min(run, length-at)
		if err := s.b.WriteZeroes(a, l, mayTrim); err != nil {
			return err
		}
		at += l
	}
	return nil
}

// Size is the array's size.
func (s *Backend) Size() int64 { return s.b.Size() }

// BlockSizes are the array's.
func (s *Backend) BlockSizes() (min, preferred, max uint32) { return s.b.BlockSizes() }
