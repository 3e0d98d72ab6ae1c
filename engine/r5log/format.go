package r5log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// On-disk constants (include/uapi/linux/raid/md_p.h, drivers/md/raid5-cache.c).
const (
	Magic   = 0x6433c509 // R5LOG_MAGIC
	Version = 1          // R5LOG_VERSION

	// BlockSize is the size of a meta block and of every data/parity page in
	// the log. The kernel only supports the journal with 4 KiB pages.
	BlockSize = 4096
	// BlockSectors is BlockSize in 512-byte sectors (BLOCK_SECTORS).
	BlockSectors = 8

	// HeaderSize is sizeof(struct r5l_meta_block): the fixed header before
	// the payloads. An empty meta block has MetaSize == HeaderSize.
	HeaderSize = 32
	// DataParityHeaderSize is sizeof(struct r5l_payload_data_parity)
	// without its checksum array.
	DataParityHeaderSize = 16
	// FlushHeaderSize is sizeof(struct r5l_payload_flush) without its
	// flush_stripes array.
	FlushHeaderSize = 8
)

// Payload types (enum r5l_payload_type).
const (
	TypeData   = 0 // R5LOG_PAYLOAD_DATA
	TypeParity = 1 // R5LOG_PAYLOAD_PARITY
	TypeFlush  = 2 // R5LOG_PAYLOAD_FLUSH
)

// Payload flags. The DATA/PARITY flags (enum r5l_payload_data_parity_flag)
// are defined by the format but Linux 6.1 never sets them: every payload it
// writes has flags 0. RESHAPED and RESHAPING are values, not bits.
const (
	FlagDiscard   = 1 // R5LOG_PAYLOAD_FLAG_DISCARD
	FlagReshaped  = 2 // R5LOG_PAYLOAD_FLAG_RESHAPED
	FlagReshaping = 3 // R5LOG_PAYLOAD_FLAG_RESHAPING

	// FlagFlushStripe is enum r5l_payload_flush_flag's only value; the
	// kernel writes flush payloads with flags 0 as well.
	FlagFlushStripe = 1 // R5LOG_PAYLOAD_FLAG_FLUSH_STRIPE
)

// Byte offsets inside a meta block (struct r5l_meta_block, packed, LE).
const (
	offMagic    = 0
	offChecksum = 4
	offVersion  = 8
	offPad1     = 9
	offPad2     = 10
	offMetaSize = 12
	offSeq      = 16
	offPosition = 24
	offPayloads = 32
)

// Byte offsets inside a payload (struct r5l_payload_data_parity and
// struct r5l_payload_flush, both packed, LE), relative to the payload.
const (
	poffType      = 0
	poffFlags     = 2
	poffSize      = 4
	poffLocation  = 8  // data/parity
	poffChecksums = 16 // data/parity
	poffStripes   = 8  // flush
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the kernel's crc32c_le(seed, b).
//
// The kernel's crc32c_le is the raw reflected CRC-32C register update: it
// neither inverts the seed on entry nor the result on exit. Go's
// crc32.Update does both (it computes ^raw(^crc, b)), so the raw update is
// ^crc32.Update(^seed, tab, b).
func Checksum(seed uint32, b []byte) uint32 {
	return ^crc32.Update(^seed, castagnoli, b)
}

// Seed returns the journal's checksum seed for an array UUID (the
// superblock's set_uuid): crc32c_le(~0, uuid, 16), kept by the kernel as
// log->uuid_checksum (r5l_init_log) and by mdadm in
// write_empty_r5l_meta_block.
func Seed(uuid [16]byte) uint32 {
	return Checksum(0xffffffff, uuid[:])
}

// Errors returned (possibly wrapped) by DecodeMeta.
var (
	ErrBadMagic    = errors.New("r5log: bad meta block magic")
	ErrBadVersion  = errors.New("r5log: bad meta block version")
	ErrBadChecksum = errors.New("r5log: meta block checksum mismatch")
	// ErrUnknownPayload is the Err of a FormatError for a payload type
	// other than DATA, PARITY or FLUSH.
	ErrUnknownPayload = errors.New("unknown payload type")
	// ErrTruncated is the Err of a FormatError for a structure that does
	// not fit (in the buffer, in meta_size, or in BlockSize).
	ErrTruncated = errors.New("truncated")
)

// FormatError reports a malformed field of a meta block.
type FormatError struct {
	Offset int    // byte offset of the field inside the meta block
	Field  string // e.g. "meta_size", "payload[3].size"
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("r5log: meta block offset %d (%s): %v", e.Offset, e.Field, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Payload is one payload of a meta block.
//
// For TypeData and TypeParity, Size is in sectors (the kernel writes 8 per
// checksum: one 4 KiB page each) and Location is the array sector of the
// data page (DATA) or the member-relative stripe sector sh->sector
// (PARITY); Checksums holds Size/8 values, crc32c_le(seed, page).
// For TypeFlush, Size is the length of FlushStripes in bytes (8 per
// stripe), and FlushStripes are stripe sectors; Location and Checksums are
// unused.
type Payload struct {
	Type, Flags  uint16
	Size         uint32
	Location     uint64
	Checksums    []uint32
	FlushStripes []uint64
}

// Meta is a decoded meta block. Position is in sectors relative to the
// journal member's data_offset (the block's own position in the log).
type Meta struct {
	Seq, Position uint64
	MetaSize      uint32
	Payloads      []Payload
}

// Len returns the number of bytes the payload occupies in a meta block.
func (p *Payload) Len() int {
	if p.Type == TypeFlush {
		return FlushHeaderSize + int(p.flushSize())
	}
	return DataParityHeaderSize + 4*len(p.Checksums)
}

// flushSize is the size field written for a flush payload: Size when it
// is consistent with FlushStripes (covers the kernel's tolerance of sizes
// that are not a multiple of 8), else 8 per stripe.
func (p *Payload) flushSize() uint32 {
	if p.Size != 0 && int(p.Size/8) == len(p.FlushStripes) {
		return p.Size
	}
	return uint32(8 * len(p.FlushStripes))
}

// Pages returns how many 4 KiB log pages follow the meta block for this
// payload (0 for a flush payload).
func (p *Payload) Pages() int {
	if p.Type == TypeFlush {
		return 0
	}
	return int(p.Size / BlockSectors)
}

// EncodeMeta returns the 4096-byte meta block for m, as the kernel builds
// it (r5l_new_meta, r5l_append_payload_meta, r5l_append_flush_payload,
// r5l_submit_current_io): zeroed page, magic, version, seq, position,
// payloads packed from byte 32, meta_size = 32 + the payloads' length, and
// the checksum = crc32c_le(seed, block with checksum field 0).
//
// m.MetaSize is ignored (it is computed). A DATA/PARITY payload whose Size
// is 0 gets Size = 8*len(Checksums); any other Size must equal that (the
// decoder derives the checksum count from Size). A flush payload's Size is
// written as 8*len(FlushStripes) unless Size is 8*len(FlushStripes) plus
// at most 7 (the extra bytes are then written as zeros).
func EncodeMeta(seed uint32, m Meta) ([]byte, error) {
	b := make([]byte, BlockSize)
	if err := encodeMetaInto(b, seed, &m); err != nil {
		return nil, err
	}
	return b, nil
}

func encodeMetaInto(b []byte, seed uint32, m *Meta) error {
	clear(b[:BlockSize])
	putHeader(b, m.Seq, m.Position)
	off := offPayloads
	for i := range m.Payloads {
		p := &m.Payloads[i]
		n := p.Len()
		if off+n > BlockSize {
			return &FormatError{Offset: off, Field: fmt.Sprintf("payload[%d]", i), Err: ErrTruncated}
		}
		q := b[off:]
		binary.LittleEndian.PutUint16(q[poffType:], p.Type)
		binary.LittleEndian.PutUint16(q[poffFlags:], p.Flags)
		switch p.Type {
		case TypeData, TypeParity:
			size := p.Size
			if size == 0 {
				size = uint32(len(p.Checksums)) * BlockSectors
			} else if size/BlockSectors != uint32(len(p.Checksums)) {
				return &FormatError{Offset: off + poffSize, Field: fmt.Sprintf("payload[%d].size", i),
					Err: fmt.Errorf("size %d sectors does not match %d checksums", p.Size, len(p.Checksums))}
			}
			binary.LittleEndian.PutUint32(q[poffSize:], size)
			binary.LittleEndian.PutUint64(q[poffLocation:], p.Location)
			for j, c := range p.Checksums {
				binary.LittleEndian.PutUint32(q[poffChecksums+4*j:], c)
			}
		case TypeFlush:
			binary.LittleEndian.PutUint32(q[poffSize:], p.flushSize())
			for j, s := range p.FlushStripes {
				binary.LittleEndian.PutUint64(q[poffStripes+8*j:], s)
			}
		default:
			return &FormatError{Offset: off + poffType, Field: fmt.Sprintf("payload[%d].type", i), Err: ErrUnknownPayload}
		}
		off += n
	}
	seal(b, seed, uint32(off))
	return nil
}

// putHeader writes magic, version, seq and position into a zeroed block.
func putHeader(b []byte, seq, pos uint64) {
	binary.LittleEndian.PutUint32(b[offMagic:], Magic)
	b[offVersion] = Version
	binary.LittleEndian.PutUint64(b[offSeq:], seq)
	binary.LittleEndian.PutUint64(b[offPosition:], pos)
}

// seal stores meta_size and the checksum (computed with the checksum field
// zero), as r5l_submit_current_io does.
func seal(b []byte, seed uint32, metaSize uint32) {
	binary.LittleEndian.PutUint32(b[offMetaSize:], metaSize)
	binary.LittleEndian.PutUint32(b[offChecksum:], 0)
	binary.LittleEndian.PutUint32(b[offChecksum:], Checksum(seed, b[:BlockSize]))
}

// MetaChecksum returns the checksum the kernel expects in the meta block b
// (the first BlockSize bytes): crc32c_le(seed, b with its checksum field
// zeroed). b is not modified.
func MetaChecksum(seed uint32, b []byte) uint32 {
	var zero [4]byte
	c := Checksum(seed, b[:offChecksum])
	c = Checksum(c, zero[:])
	return Checksum(c, b[offChecksum+4:BlockSize])
}

// EmptyMeta returns an empty meta block (no payloads, meta_size 32) for seq
// and position (sectors). This is byte for byte what all three writers of
// empty meta blocks produce: mdadm 4.2's write_empty_r5l_meta_block at
// --create (seq = a random 32-bit value, position 0), the kernel's
// r5l_log_write_empty_meta_block when it starts a new log
// (r5l_load_log: position 0, seq = get_random_u32()) and after a recovery
// without data-only stripes (r5l_recovery_log: position = the end of the
// valid log, seq = the next seq + 10000). They differ only in seq and
// position.
func EmptyMeta(seed uint32, seq, position uint64) []byte {
	b := make([]byte, BlockSize)
	putHeader(b, seq, position)
	seal(b, seed, HeaderSize)
	return b
}

// DecodeMeta decodes the meta block in b[:BlockSize].
//
// Errors: ErrBadMagic and ErrBadVersion (with Seq, Position and MetaSize
// filled from the header), ErrBadChecksum (with the block decoded as far as
// it goes), or a *FormatError for a short buffer, a meta_size outside
// [32, 4096], an unknown payload type or a payload that overruns meta_size
// (with the payloads before it). Use errors.Is for the sentinels.
//
// DecodeMeta is stricter than the kernel's recovery, which does not check
// meta_size >= 32 (a smaller meta_size reads as an empty block) and
// reads a DATA/PARITY payload's first checksum even when its size is 0;
// Scan follows the kernel exactly.
func DecodeMeta(seed uint32, b []byte) (Meta, error) {
	var m Meta
	if len(b) < BlockSize {
		return m, &FormatError{Offset: len(b), Field: "block", Err: ErrTruncated}
	}
	b = b[:BlockSize]
	m.Seq = binary.LittleEndian.Uint64(b[offSeq:])
	m.Position = binary.LittleEndian.Uint64(b[offPosition:])
	m.MetaSize = binary.LittleEndian.Uint32(b[offMetaSize:])
	if binary.LittleEndian.Uint32(b[offMagic:]) != Magic {
		return m, ErrBadMagic
	}
	if b[offVersion] != Version {
		return m, ErrBadVersion
	}
	var sumErr error
	if binary.LittleEndian.Uint32(b[offChecksum:]) != MetaChecksum(seed, b) {
		sumErr = ErrBadChecksum
	}
	err := decodePayloads(b, &m)
	if sumErr != nil {
		return m, sumErr
	}
	return m, err
}

func decodePayloads(b []byte, m *Meta) error {
	size := int(m.MetaSize)
	if m.MetaSize < HeaderSize || m.MetaSize > BlockSize {
		return &FormatError{Offset: offMetaSize, Field: "meta_size", Err: fmt.Errorf("%d outside [%d, %d]", m.MetaSize, HeaderSize, BlockSize)}
	}
	// Count first so that Payloads is allocated once.
	n := 0
	for off := offPayloads; off < size; n++ {
		l, err := payloadLen(b, off, size, n)
		if err != nil {
			break
		}
		off += l
	}
	if n > 0 {
		m.Payloads = make([]Payload, 0, n)
	}
	for off, i := offPayloads, 0; off < size; i++ {
		l, err := payloadLen(b, off, size, i)
		if err != nil {
			return err
		}
		q := b[off:]
		p := Payload{
			Type:  binary.LittleEndian.Uint16(q[poffType:]),
			Flags: binary.LittleEndian.Uint16(q[poffFlags:]),
			Size:  binary.LittleEndian.Uint32(q[poffSize:]),
		}
		if p.Type == TypeFlush {
			k := int(p.Size / 8)
			p.FlushStripes = make([]uint64, k)
			for j := range k {
				p.FlushStripes[j] = binary.LittleEndian.Uint64(q[poffStripes+8*j:])
			}
		} else {
			p.Location = binary.LittleEndian.Uint64(q[poffLocation:])
			k := int(p.Size / BlockSectors)
			p.Checksums = make([]uint32, k)
			for j := range k {
				p.Checksums[j] = binary.LittleEndian.Uint32(q[poffChecksums+4*j:])
			}
		}
		m.Payloads = append(m.Payloads, p)
		off += l
	}
	return nil
}

// payloadLen returns the length of the payload at off as the kernel's
// recovery computes it (r5l_recovery_verify_data_checksum_for_mb), or a
// FormatError if the type is unknown or the payload overruns metaSize.
func payloadLen(b []byte, off, metaSize, i int) (int, error) {
	if off+poffSize+4 > metaSize {
		return 0, &FormatError{Offset: off, Field: fmt.Sprintf("payload[%d]", i), Err: ErrTruncated}
	}
	typ := binary.LittleEndian.Uint16(b[off+poffType:])
	size := uint64(binary.LittleEndian.Uint32(b[off+poffSize:]))
	var l uint64
	switch typ {
	case TypeData, TypeParity:
		l = DataParityHeaderSize + 4*(size/BlockSectors)
	case TypeFlush:
		// The kernel takes size in bytes as is; a size that is not a
		// multiple of 8 covers size/8 stripes plus ignored bytes.
		l = FlushHeaderSize + size
	default:
		return 0, &FormatError{Offset: off + poffType, Field: fmt.Sprintf("payload[%d].type", i), Err: ErrUnknownPayload}
	}
	if uint64(off)+l > uint64(metaSize) {
		return 0, &FormatError{Offset: off + poffSize, Field: fmt.Sprintf("payload[%d].size", i), Err: ErrTruncated}
	}
	return int(l), nil
}
