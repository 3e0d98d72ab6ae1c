package bitmap

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// goodHeader is what mdadm 4.2 writes for a 1 GiB raid1 member with the
// default bitmap (64 MiB chunks, 5 s delay).
func goodHeader() *Header {
	h := &Header{
		Magic:       Magic,
		Version:     Version,
		Events:      7,
		SyncSize:    2097152,
		ChunkSize:   64 << 20,
		DaemonSleep: DefaultDaemonSleep,
	}
	for i := range h.UUID {
		h.UUID[i] = byte(0xa0 + i)
	}
	h.EventsCleared = 7
	return h
}

// offsets collects the Offset of every *FormatError in err (joined or not).
func offsets(err error) []int64 {
	var out []int64
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		var fe *FormatError
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if errors.As(e, &fe) {
			out = append(out, fe.Offset)
		}
	}
	walk(err)
	return out
}

func TestParse(t *testing.T) {
	mod := func(f func(h *Header)) []byte {
		h := goodHeader()
		f(h)
		return h.Marshal()
	}
	tests := []struct {
		name    string
		b       []byte
		nilHdr  bool
		is      []error // errors.Is must hold for each
		offsets []int64 // FormatError offsets, in order
	}{
		{name: "valid", b: goodHeader().Marshal()},
		{name: "valid with trailing bits", b: append(goodHeader().Marshal(), 0xff, 0xff)},
		{name: "short", b: goodHeader().Marshal()[:255], nilHdr: true, is: []error{ErrShort}},
		{name: "empty", b: nil, nilHdr: true, is: []error{ErrShort}},
		{name: "bad magic", b: mod(func(h *Header) { h.Magic = 0x6d746963 }), nilHdr: true, is: []error{ErrBadMagic}},
		{name: "zeros", b: make([]byte, 4096), nilHdr: true, is: []error{ErrBadMagic}},
		{name: "version 2", b: mod(func(h *Header) { h.Version = 2 }), is: []error{ErrVersion}, offsets: []int64{4}},
		{name: "version 3", b: mod(func(h *Header) { h.Version = 3 })},
		{name: "version 5", b: mod(func(h *Header) { h.Version = 5; h.Nodes = 4 })},
		{name: "version 6 lockless", b: mod(func(h *Header) { h.Version = 6; h.ChunkSize = 0 }), is: []error{ErrLockless}},
		{name: "version 7", b: mod(func(h *Header) { h.Version = 7 }), is: []error{ErrVersion}, offsets: []int64{4}},
		{name: "chunk 0", b: mod(func(h *Header) { h.ChunkSize = 0 }), is: []error{ErrChunkSize}, offsets: []int64{52}},
		{name: "chunk 256", b: mod(func(h *Header) { h.ChunkSize = 256 }), is: []error{ErrChunkSize}, offsets: []int64{52}},
		{name: "chunk 511", b: mod(func(h *Header) { h.ChunkSize = 511 }), is: []error{ErrChunkSize}, offsets: []int64{52}},
		{name: "chunk 512", b: mod(func(h *Header) { h.ChunkSize = 512 })},
		{name: "chunk 2^31", b: mod(func(h *Header) { h.ChunkSize = 1 << 31 })},
		{name: "chunk 12 KiB", b: mod(func(h *Header) { h.ChunkSize = 3 << 12 }), is: []error{ErrChunkSize}, offsets: []int64{52}},
		{name: "daemon 0", b: mod(func(h *Header) { h.DaemonSleep = 0 }), is: []error{ErrDaemonSleep}, offsets: []int64{56}},
		{name: "daemon 1", b: mod(func(h *Header) { h.DaemonSleep = 1 })},
		// 0x80000000 * 250 == 0 mod 2^32: the kernel's 32-bit product is 0.
		{name: "daemon 2^31", b: mod(func(h *Header) { h.DaemonSleep = 1 << 31 }), is: []error{ErrDaemonSleep}, offsets: []int64{56}},
		{name: "daemon 2^30", b: mod(func(h *Header) { h.DaemonSleep = 1 << 30 })},
		{name: "daemon max", b: mod(func(h *Header) { h.DaemonSleep = 0xffffffff })},
		{name: "write-behind 16383", b: mod(func(h *Header) { h.WriteBehind = 16383 })},
		{name: "write-behind 16384", b: mod(func(h *Header) { h.WriteBehind = 16384 }), is: []error{ErrWriteBehind}, offsets: []int64{60}},
		{name: "all bad", b: mod(func(h *Header) {
			h.Version = 9
			h.ChunkSize = 1000
			h.DaemonSleep = 0
			h.WriteBehind = 1 << 20
		}), is: []error{ErrVersion, ErrChunkSize, ErrDaemonSleep, ErrWriteBehind}, offsets: []int64{4, 52, 56, 60}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Parse(tt.b)
			if (h == nil) != tt.nilHdr {
				t.Fatalf("header nil = %v, want %v", h == nil, tt.nilHdr)
			}
			if len(tt.is) == 0 && err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			for _, want := range tt.is {
				if !errors.Is(err, want) {
					t.Errorf("got %v, want errors.Is %v", err, want)
				}
			}
			if got := offsets(err); !slices.Equal(got, tt.offsets) {
				t.Errorf("FormatError offsets %v, want %v", got, tt.offsets)
			}
			if h != nil && !bytes.Equal(h.Marshal(), tt.b[:HeaderSize]) {
				t.Errorf("Marshal does not reproduce the input header")
			}
		})
	}
}

func TestHeaderOffsets(t *testing.T) {
	// Every field at its bitmap_super_t offset, little-endian.
	h := &Header{
		Magic: Magic, Version: 0x04030201, Events: 0x1817161514131211,
		EventsCleared: 0x2827262524232221, SyncSize: 0x3837363534333231,
		State: 0x44434241, ChunkSize: 0x54535251, DaemonSleep: 0x64636261,
		WriteBehind: 0x74737271, SectorsReserved: 0x84838281, Nodes: 0x94939291,
	}
	for i := range h.UUID {
		h.UUID[i] = byte(0xc0 + i)
	}
	h.ClusterName[0], h.ClusterName[63] = 'x', 'y'
	h.Pad[0], h.Pad[119] = 1, 2
	b := h.Marshal()
	checks := []struct {
		off  int
		want []byte
	}{
		{0, []byte("bitm")},
		{4, []byte{1, 2, 3, 4}},
		{8, []byte{0xc0, 0xc1}},
		{23, []byte{0xcf}},
		{24, []byte{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}},
		{32, []byte{0x21}},
		{40, []byte{0x31}},
		{48, []byte{0x41}},
		{52, []byte{0x51}},
		{56, []byte{0x61}},
		{60, []byte{0x71}},
		{64, []byte{0x81}},
		{68, []byte{0x91, 0x92, 0x93, 0x94}},
		{72, []byte{'x'}},
		{135, []byte{'y'}},
		{136, []byte{1}},
		{255, []byte{2}},
	}
	for _, c := range checks {
		if got := b[c.off : c.off+len(c.want)]; !bytes.Equal(got, c.want) {
			t.Errorf("offset %d: got % x, want % x", c.off, got, c.want)
		}
	}
	if got := decodeHeader(b); *got != *h {
		t.Errorf("decode(Marshal(h)) = %+v, want %+v", got, h)
	}
}

func TestCheckFor(t *testing.T) {
	good := goodHeader()
	other := good.UUID
	other[15] ^= 1
	tests := []struct {
		name   string
		mod    func(h *Header)
		uuid   [16]byte
		events uint64
		want   error // sentinel, or nil
		stale  *StaleError
	}{
		{name: "same events", uuid: good.UUID, events: 7},
		{name: "bitmap ahead by one", uuid: good.UUID, events: 6},
		{name: "uuid mismatch", uuid: other, events: 7, want: ErrUUIDMismatch},
		{name: "uuid mismatch wins over stale", uuid: other, events: 100, want: ErrUUIDMismatch},
		{name: "older bitmap", uuid: good.UUID, events: 8,
			stale: &StaleError{Events: 7, ArrayEvents: 8}},
		{name: "stale flag", mod: func(h *Header) { h.State = StateStale }, uuid: good.UUID, events: 7,
			stale: &StaleError{Events: 7, ArrayEvents: 7, Flagged: true}},
		{name: "write error state", mod: func(h *Header) { h.State = StateWriteError }, uuid: good.UUID, events: 7,
			want: ErrWriteErrorState},
		{name: "clustered with nodes: no events check",
			mod: func(h *Header) { h.Version = VersionClustered; h.Nodes = 2 }, uuid: good.UUID, events: 99},
		{name: "version 4 ignores nodes",
			mod: func(h *Header) { h.Nodes = 2 }, uuid: good.UUID, events: 99,
			stale: &StaleError{Events: 7, ArrayEvents: 99}},
		{name: "clustered without nodes",
			mod: func(h *Header) { h.Version = VersionClustered }, uuid: good.UUID, events: 99,
			stale: &StaleError{Events: 7, ArrayEvents: 99}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := *good
			if tt.mod != nil {
				tt.mod(&h)
			}
			err := h.CheckFor(tt.uuid, tt.events)
			if tt.stale != nil {
				var se *StaleError
				if !errors.As(err, &se) {
					t.Fatalf("got %v, want a StaleError", err)
				}
				if *se != *tt.stale {
					t.Fatalf("got %+v, want %+v", *se, *tt.stale)
				}
				return
			}
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestStaleErrorText(t *testing.T) {
	got := (&StaleError{Events: 3, ArrayEvents: 5}).Error()
	want := "bitmap: bitmap file is out of date (3 < 5) -- forcing full recovery"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReAddable(t *testing.T) {
	h := goodHeader()
	h.EventsCleared = 10
	for _, c := range []struct {
		ev   uint64
		want bool
	}{{9, false}, {10, true}, {11, true}} {
		if got := h.ReAddable(c.ev); got != c.want {
			t.Errorf("ReAddable(%d) = %v, want %v", c.ev, got, c.want)
		}
	}
}

func TestDecodeUnchecked(t *testing.T) {
	b := make([]byte, HeaderSize)
	le.PutUint32(b[0:], 0xdeadbeef) // not the bitmap magic
	le.PutUint32(b[4:], 99)         // no such version
	le.PutUint64(b[40:], 2048)      // sync_size
	le.PutUint32(b[52:], 0)         // chunksize Validate refuses
	le.PutUint32(b[68:], 3)         // nodes
	copy(b[8:24], "0123456789abcdef")
	for i := 72; i < HeaderSize; i++ {
		b[i] = 'c' // cluster name without NUL, running into the padding
	}
	h, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Magic != 0xdeadbeef || h.Version != 99 || h.SyncSize != 2048 || h.ChunkSize != 0 || h.Nodes != 3 || string(h.UUID[:]) != "0123456789abcdef" {
		t.Fatalf("Decode = %+v", h)
	}
	if got := len(h.ClusterNameC()); got != HeaderSize-72 {
		t.Fatalf("ClusterNameC has %d bytes, want %d", got, HeaderSize-72)
	}
	b[80] = 0
	h, _ = Decode(b)
	if got := string(h.ClusterNameC()); got != "cccccccc" {
		t.Fatalf("ClusterNameC = %q", got)
	}
	if HasMagic(b) || HasMagic([]byte{0xd5, 0x44, 0x14}) {
		t.Fatal("HasMagic without the magic")
	}
	le.PutUint32(b[0:], Magic)
	if !HasMagic(b[:4]) {
		t.Fatal("HasMagic misses the magic")
	}
	if _, err := Decode(b[:HeaderSize-1]); err != ErrShort {
		t.Fatalf("Decode of a short buffer: %v", err)
	}
}
