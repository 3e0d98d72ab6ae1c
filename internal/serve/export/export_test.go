package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestCheckBlockSizes(t *testing.T) {
	for _, tc := range []struct {
		min, pref, max uint32
		ok             bool
	}{
		{512, 4096, 1 << 20, true},
		{1, 512, 1 << 20, true},
		{4096, 3 * 512 << 10, 2 << 20, true}, // 3-disk full stripe: not a power of two
		{65536, 65536, 1 << 20, true},
		{0, 4096, 1 << 20, false},
		{3072, 6144, 1 << 20, false},
		{128 << 10, 128 << 10, 1 << 20, false},
		{512, 256, 1 << 20, false},
		{4096, 6144, 1 << 20, false},
		{512, 4096, 1<<20 - 1, false},
		{512, 2 << 20, 1 << 20, false},
	} {
		err := CheckBlockSizes(tc.min, tc.pref, tc.max)
		if (err == nil) != tc.ok {
			t.Errorf("CheckBlockSizes(%d, %d, %d) = %v, want ok=%v", tc.min, tc.pref, tc.max, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBlockSizes) {
			t.Errorf("error %v is not ErrBlockSizes", err)
		}
	}
}

type backendCase struct {
	name string
	new  func(t *testing.T, size int64) Backend
}

func backends() []backendCase {
	return []backendCase{
		{"mem", func(t *testing.T, size int64) Backend {
			m, err := NewMem(size, 512, 4096, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"file", func(t *testing.T, size int64) Backend {
			f, err := os.Create(filepath.Join(t.TempDir(), "dev"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			b, err := NewFile(f, 512, 4096, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	}
}

// TestBackends checks each Backend against a byte-slice model through a
// random sequence of writes, FUA writes, zeroes and discards.
func TestBackends(t *testing.T) {
	const size = 1<<20 + 3*512 // not a multiple of the 64 KiB page
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.new(t, size)
			if b.Size() != size {
				t.Fatalf("Size = %d, want %d", b.Size(), size)
			}
			if mn, pr, mx := b.BlockSizes(); mn != 512 || pr != 4096 || mx != 1<<20 {
				t.Fatalf("BlockSizes = %d %d %d", mn, pr, mx)
			}
			model := make([]byte, size)
			rng := rand.New(rand.NewPCG(1, 2))
			src := make([]byte, size)
			for j := 0; j+8 <= len(src); j += 8 {
				binary.LittleEndian.PutUint64(src[j:], rng.Uint64())
			}
			for i := 0; i < 400; i++ {
				off := rng.Int64N(size/512) * 512
				n := min(rng.Int64N(300<<10/512+1)*512, size-off)
				switch rng.IntN(5) {
				case 0, 1:
					s := rng.Int64N(size - n + 1)
					p := src[s : s+n]
					w := b.WriteAt
					if rng.IntN(2) == 0 {
						w = b.WriteAtFUA
					}
					if k, err := w(p, off); err != nil || k != len(p) {
						t.Fatalf("write %d@%d: %d, %v", n, off, k, err)
					}
					copy(model[off:], p)
				case 2:
					if err := b.WriteZeroes(off, n, rng.IntN(2) == 0); err != nil {
						t.Fatal(err)
					}
					clear(model[off : off+n])
				case 3:
					// Discarded data is unspecified: both backends zero it,
					// and the test relies on that to keep the model exact.
					if err := b.Discard(off, n); err != nil {
						t.Fatal(err)
					}
					clear(model[off : off+n])
				case 4:
					if err := b.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]byte, n)
				if k, err := b.ReadAt(got, off); err != nil || k != len(got) {
					t.Fatalf("read %d@%d: %d, %v", n, off, k, err)
				}
				if !bytes.Equal(got, model[off:off+n]) {
					t.Fatalf("step %d: read %d@%d differs from model", i, n, off)
				}
			}
			all := make([]byte, size)
			if _, err := b.ReadAt(all, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all, model) {
				t.Fatal("final contents differ from model")
			}
		})
	}
}

func TestBackendRange(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.new(t, 64<<10)
			p := make([]byte, 1024)
			for _, off := range []int64{-512, 63<<10 + 512, 64 << 10, 1 << 62} {
				if _, err := b.ReadAt(p, off); !errors.Is(err, ErrRange) {
					t.Errorf("ReadAt at %d: %v, want ErrRange", off, err)
				}
				if _, err := b.WriteAt(p, off); !errors.Is(err, ErrRange) {
					t.Errorf("WriteAt at %d: %v, want ErrRange", off, err)
				}
				if err := b.WriteZeroes(off, 1024, true); !errors.Is(err, ErrRange) {
					t.Errorf("WriteZeroes at %d: %v, want ErrRange", off, err)
				}
				if err := b.Discard(off, 1024); !errors.Is(err, ErrRange) {
					t.Errorf("Discard at %d: %v, want ErrRange", off, err)
				}
			}
		})
	}
}

func TestMemSparse(t *testing.T) {
	m, err := NewMem(1<<20, 4096, 65536, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if m.Allocated() != 0 {
		t.Fatalf("fresh Mem has %d bytes allocated", m.Allocated())
	}
	if _, err := m.WriteAt(make([]byte, 4096), 70<<10); err != nil {
		t.Fatal(err)
	}
	if got := m.Allocated(); got != 64<<10 {
		t.Fatalf("after one write Allocated = %d, want 65536", got)
	}
	if err := m.WriteZeroes(128<<10, 128<<10, false); err != nil {
		t.Fatal(err)
	}
	if got := m.Allocated(); got != 3*64<<10 {
		t.Fatalf("WriteZeroes without trim must provision: Allocated = %d", got)
	}
	if err := m.Discard(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := m.Allocated(); got != 0 {
		t.Fatalf("after discarding everything Allocated = %d", got)
	}
	if _, err := NewMem(1000, 512, 4096, 1<<20); !errors.Is(err, ErrBlockSizes) {
		t.Fatalf("size not a multiple of min: %v", err)
	}
}

// TestMemConcurrent runs overlapping writers and readers; under -race it
// checks the page locking. Each writer writes whole 8 KiB blocks filled with
// one byte, so every 8 KiB block must read back uniform when all are done.
func TestMemConcurrent(t *testing.T) {
	m, err := NewMem(1<<20, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			p := make([]byte, 8192)
			q := make([]byte, 8192)
			for i := 0; i < 500; i++ {
				off := rng.Int64N(128) * 8192
				if i%3 == 0 {
					m.ReadAt(q, off)
					continue
				}
				for j := range p {
					p[j] = byte(w + 1)
				}
				m.WriteAt(p, off)
			}
		}()
	}
	wg.Wait()
	all := make([]byte, 1<<20)
	m.ReadAt(all, 0)
	for off := 0; off < len(all); off += 8192 {
		blk := all[off : off+8192]
		// A block straddles no page boundary (8 KiB divides 64 KiB), so
		// each write landed atomically.
		if bytes.Count(blk, blk[:1]) != len(blk) {
			t.Fatalf("block at %d is torn", off)
		}
	}
}
