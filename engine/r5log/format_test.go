package r5log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

func TestChecksumIsRawCRC32C(t *testing.T) {
	// crc32c_le(~0, x) equals Go's standard CRC-32C without its final
	// inversion; crc32c_le(0, x) equals ^Update(^0...) etc. Check the raw
	// update against a bitwise reference implementation.
	ref := func(crc uint32, b []byte) uint32 {
		for _, c := range b {
			crc ^= uint32(c)
			for range 8 {
				if crc&1 != 0 {
					crc = crc>>1 ^ 0x82f63b78
				} else {
					crc >>= 1
				}
			}
		}
		return crc
	}
	data := []byte("123456789")
	for _, seed := range []uint32{0, 1, 0xffffffff, 0xdeadbeef} {
		if got, want := Checksum(seed, data), ref(seed, data); got != want {
			t.Errorf("Checksum(%#x) = %#x, want %#x", seed, got, want)
		}
	}
	if got, want := Checksum(0xffffffff, data), ^crc32.Checksum(data, castagnoli); got != want {
		t.Errorf("Checksum(~0, 123456789) = %#x, want %#x", got, want)
	}
	// Chaining, as the kernel chains uuid seed and block.
	if Checksum(Checksum(7, data[:4]), data[4:]) != Checksum(7, data) {
		t.Error("Checksum does not chain")
	}
}

// TestSeedAndChecksumAgainstKernel checks Seed and the meta block checksum
// against blocks written by mdadm 4.2 (block 0) and Linux 6.1 (every other
// meta block) in the fixtures.
func TestSeedAndChecksumAgainstKernel(t *testing.T) {
	for _, name := range []string{"f0-journal.img.gz", "f1-journal.img.gz", "f2-journal.img.gz", "f3-journal.img.gz", "f3-after.img.gz"} {
		fx := loadFixture(t, name)
		seed := fx.seed()
		log := fx.logArea()
		n := 0
		for off := 0; off+BlockSize <= len(log); off += BlockSize {
			b := log[off : off+BlockSize]
			if binary.LittleEndian.Uint32(b) != Magic {
				continue
			}
			n++
			m, err := DecodeMeta(seed, b)
			if err != nil {
				t.Errorf("%s: block at sector %d: %v", name, off/512, err)
				continue
			}
			if m.Position != uint64(off/512) {
				t.Errorf("%s: block at sector %d has position %d", name, off/512, m.Position)
			}
			// Data/parity page checksums of the block's payloads.
			pos := uint64(off/512) + BlockSectors
			for _, p := range m.Payloads {
				for i, c := range p.Checksums {
					s := RingAdd(fx.dataSize, pos, uint64(i)*BlockSectors)
					if got := Checksum(seed, fx.block(s)); got != c {
						t.Errorf("%s: meta %d: page at %d checksum %#x, payload says %#x", name, off/512, s, got, c)
					}
				}
				if p.Type != TypeFlush {
					pos = RingAdd(fx.dataSize, pos, uint64(p.Size))
				}
			}
		}
		if n < 2 {
			t.Errorf("%s: only %d meta blocks", name, n)
		}
		t.Logf("%s: %d meta blocks verified", name, n)
	}
}

// TestEmptyMetaMatchesMdadm: the block at data_offset after
// `mdadm -CR ... --write-journal` is mdadm's write_empty_r5l_meta_block
// (position 0, random 32-bit seq); the block at sector 8 is the kernel's
// r5l_log_write_empty_meta_block after the first start found a clean log
// (position 8, seq = mdadm's + 1 + 10000).
func TestEmptyMetaMatchesMdadm(t *testing.T) {
	for _, name := range []string{"f0-journal.img.gz", "f1-journal.img.gz", "f3-journal.img.gz"} {
		fx := loadFixture(t, name)
		seed := fx.seed()
		b0 := fx.block(0)
		seq := binary.LittleEndian.Uint64(b0[offSeq:])
		if seq>>32 != 0 {
			t.Errorf("%s: mdadm seq %#x is not 32-bit", name, seq)
		}
		if got := EmptyMeta(seed, seq, 0); !bytes.Equal(got, b0) {
			t.Errorf("%s: EmptyMeta(seq %#x, 0) differs from mdadm's block", name, seq)
		}
		if got := EmptyMeta(seed, seq+10001, 8); !bytes.Equal(got, fx.block(8)) {
			t.Errorf("%s: EmptyMeta(seq+10001, 8) differs from the kernel's block at 8", name)
		}
	}
	fx := loadFixture(t, "f0-journal.img.gz")
	if fx.tail != 8 {
		t.Errorf("f0: journal_tail %d after create+stop, want 8", fx.tail)
	}
}

func TestFieldOffsets(t *testing.T) {
	m := Meta{
		Seq:      0x1122334455667788,
		Position: 0x99aabbccddeeff00,
		Payloads: []Payload{
			{Type: TypeData, Flags: 0x0102, Location: 0x0a0b0c0d0e0f1011, Checksums: []uint32{0xcafebabe}},
			{Type: TypeParity, Location: 0x2021222324252627, Checksums: []uint32{0x31323334, 0x41424344}},
			{Type: TypeFlush, Flags: FlagFlushStripe, FlushStripes: []uint64{0x5152535455565758, 0x6162636465666768}},
		},
	}
	b, err := EncodeMeta(0x12345678, m)
	if err != nil {
		t.Fatal(err)
	}
	u16 := func(o int) uint64 { return uint64(binary.LittleEndian.Uint16(b[o:])) }
	u32 := func(o int) uint64 { return uint64(binary.LittleEndian.Uint32(b[o:])) }
	u64 := func(o int) uint64 { return binary.LittleEndian.Uint64(b[o:]) }
	u8 := func(o int) uint64 { return uint64(b[o]) }
	p0, p1, p2 := 32, 32+20, 32+20+24
	tests := []struct {
		field string
		off   int
		get   func(int) uint64
		want  uint64
	}{
		{"magic", 0, u32, Magic},
		{"checksum", 4, u32, uint64(MetaChecksum(0x12345678, b))},
		{"version", 8, u8, Version},
		{"__zero_pading_1", 9, u8, 0},
		{"__zero_pading_2", 10, u16, 0},
		{"meta_size", 12, u32, 32 + 20 + 24 + 24},
		{"seq", 16, u64, m.Seq},
		{"position", 24, u64, m.Position},
		{"data.type", p0 + 0, u16, TypeData},
		{"data.flags", p0 + 2, u16, 0x0102},
		{"data.size", p0 + 4, u32, 8},
		{"data.location", p0 + 8, u64, 0x0a0b0c0d0e0f1011},
		{"data.checksum[0]", p0 + 16, u32, 0xcafebabe},
		{"parity.type", p1 + 0, u16, TypeParity},
		{"parity.flags", p1 + 2, u16, 0},
		{"parity.size", p1 + 4, u32, 16},
		{"parity.location", p1 + 8, u64, 0x2021222324252627},
		{"parity.checksum[0]", p1 + 16, u32, 0x31323334},
		{"parity.checksum[1]", p1 + 20, u32, 0x41424344},
		{"flush.type", p2 + 0, u16, TypeFlush},
		{"flush.flags", p2 + 2, u16, FlagFlushStripe},
		{"flush.size", p2 + 4, u32, 16},
		{"flush.flush_stripes[0]", p2 + 8, u64, 0x5152535455565758},
		{"flush.flush_stripes[1]", p2 + 16, u64, 0x6162636465666768},
	}
	for _, tc := range tests {
		if got := tc.get(tc.off); got != tc.want {
			t.Errorf("%s at %d = %#x, want %#x", tc.field, tc.off, got, tc.want)
		}
	}
	if !bytes.Equal(b[32+20+24+24:], make([]byte, BlockSize-100)) {
		t.Error("bytes after meta_size are not zero")
	}
	// constants vs struct sizes
	if HeaderSize != 32 || DataParityHeaderSize != 16 || FlushHeaderSize != 8 || BlockSectors*512 != BlockSize {
		t.Error("size constants")
	}
}

func TestRoundTrip(t *testing.T) {
	seed := Seed([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	metas := []Meta{
		{Seq: 1, Position: 0},
		{Seq: 1 << 40, Position: 14328, Payloads: []Payload{
			{Type: TypeData, Size: 8, Location: 800, Checksums: []uint32{1}},
			{Type: TypeData, Size: 8, Location: 928, Checksums: []uint32{2}},
			{Type: TypeParity, Size: 16, Location: 288, Checksums: []uint32{3, 4}},
		}},
		{Seq: 77, Position: 8, Payloads: []Payload{
			{Type: TypeFlush, Size: 8, FlushStripes: []uint64{640}},
			{Type: TypeFlush, Size: 24, FlushStripes: []uint64{1, 2, 3}},
			{Type: TypeParity, Size: 8, Location: 5, Checksums: []uint32{9}, Flags: FlagReshaping},
		}},
	}
	// a full block: 32 + 203*20 = 4092
	full := Meta{Seq: 5, Position: 16}
	for i := range 203 {
		full.Payloads = append(full.Payloads, Payload{Type: TypeData, Size: 8, Location: uint64(i) * 8, Checksums: []uint32{uint32(i)}})
	}
	metas = append(metas, full)
	for i, m := range metas {
		b, err := EncodeMeta(seed, m)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		got, err := DecodeMeta(seed, b)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		want := m
		want.MetaSize = binary.LittleEndian.Uint32(b[offMetaSize:])
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d: round trip\n got %+v\nwant %+v", i, got, want)
		}
		b2, _ := EncodeMeta(seed, got)
		if !bytes.Equal(b, b2) {
			t.Errorf("%d: re-encode differs", i)
		}
	}
	// one more payload does not fit
	full.Payloads = append(full.Payloads, Payload{Type: TypeData, Checksums: []uint32{0}})
	var fe *FormatError
	if _, err := EncodeMeta(seed, full); !errors.As(err, &fe) || !errors.Is(err, ErrTruncated) {
		t.Errorf("overfull block: %v", err)
	}
	if _, err := EncodeMeta(seed, Meta{Payloads: []Payload{{Type: 7}}}); !errors.Is(err, ErrUnknownPayload) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := EncodeMeta(seed, Meta{Payloads: []Payload{{Type: TypeData, Size: 16, Checksums: []uint32{1}}}}); err == nil {
		t.Error("size/checksum mismatch accepted")
	}
}

func TestDecodeErrors(t *testing.T) {
	seed := uint32(0xabcdef01)
	good, _ := EncodeMeta(seed, Meta{Seq: 9, Position: 64, Payloads: []Payload{
		{Type: TypeData, Location: 8, Checksums: []uint32{5}},
		{Type: TypeFlush, FlushStripes: []uint64{3}},
	}})
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	reseal := func(b []byte) {
		binary.LittleEndian.PutUint32(b[offChecksum:], MetaChecksum(seed, b))
	}

	if _, err := DecodeMeta(seed, good[:100]); !errors.Is(err, ErrTruncated) {
		t.Errorf("short: %v", err)
	}
	m, err := DecodeMeta(seed, mod(func(b []byte) { b[0] ^= 1 }))
	if !errors.Is(err, ErrBadMagic) || m.Seq != 9 || m.Position != 64 {
		t.Errorf("magic: %v %+v", err, m)
	}
	if _, err := DecodeMeta(seed, mod(func(b []byte) { b[offVersion] = 2; reseal(b) })); !errors.Is(err, ErrBadVersion) {
		t.Errorf("version: %v", err)
	}
	m, err = DecodeMeta(seed, mod(func(b []byte) { b[offSeq] ^= 1 }))
	if !errors.Is(err, ErrBadChecksum) || len(m.Payloads) != 2 || m.Seq != 8 {
		t.Errorf("checksum: %v %+v", err, m)
	}
	if _, err := DecodeMeta(seed+1, good); !errors.Is(err, ErrBadChecksum) {
		t.Errorf("wrong seed: %v", err)
	}
	var fe *FormatError
	_, err = DecodeMeta(seed, mod(func(b []byte) { binary.LittleEndian.PutUint32(b[offMetaSize:], 5000); reseal(b) }))
	if !errors.As(err, &fe) || fe.Field != "meta_size" || fe.Offset != offMetaSize {
		t.Errorf("meta_size: %v", err)
	}
	m, err = DecodeMeta(seed, mod(func(b []byte) { binary.LittleEndian.PutUint16(b[32+20:], 9); reseal(b) }))
	if !errors.As(err, &fe) || !errors.Is(err, ErrUnknownPayload) || fe.Offset != 52 || len(m.Payloads) != 1 {
		t.Errorf("unknown payload: %v %+v", err, m)
	}
	// data payload claiming 16 pages: overruns meta_size
	m, err = DecodeMeta(seed, mod(func(b []byte) { binary.LittleEndian.PutUint32(b[32+4:], 128); reseal(b) }))
	if !errors.As(err, &fe) || !errors.Is(err, ErrTruncated) || len(m.Payloads) != 0 {
		t.Errorf("overrun: %v %+v", err, m)
	}
	if (&FormatError{Offset: 3, Field: "x", Err: ErrTruncated}).Error() == "" {
		t.Error("empty message")
	}
}

func FuzzDecodeMeta(f *testing.F) {
	seed := uint32(0x5eed)
	// Seeds are trimmed to meta_size: the body pads inputs with zeros to a
	// whole block (small inputs keep the fuzzer's minimizer fast).
	f.Add(EmptyMeta(seed, 1, 0)[:HeaderSize])
	b, _ := EncodeMeta(seed, Meta{Seq: 3, Position: 8, Payloads: []Payload{
		{Type: TypeData, Location: 8, Checksums: []uint32{1}},
		{Type: TypeParity, Location: 0, Checksums: []uint32{2, 3}},
		{Type: TypeFlush, FlushStripes: []uint64{0, 8}},
	}})
	f.Add(b[:binary.LittleEndian.Uint32(b[offMetaSize:])])
	f.Add([]byte{0x09, 0xc5, 0x33, 0x64})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > BlockSize {
			b = b[:BlockSize]
		}
		full := make([]byte, BlockSize)
		copy(full, b)
		// Make the header pass so the payload parser is exercised.
		if len(b) >= 4 && binary.LittleEndian.Uint32(b) == Magic {
			full[offVersion] = Version
			binary.LittleEndian.PutUint32(full[offChecksum:], MetaChecksum(seed, full))
		}
		m, err := DecodeMeta(seed, full)
		_, _ = DecodeMeta(seed, b)
		if err == nil {
			out, err := EncodeMeta(seed, m)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			m2, err := DecodeMeta(seed, out)
			if err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("re-decode: %v", err)
			}
		}
	})
}
