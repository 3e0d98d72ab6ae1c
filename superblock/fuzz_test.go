package superblock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// fixtureSeeds returns superblock-sized windows from files under the
// repository's testdata (real images made by the fixture generator, if any)
// and this package's testdata: every 4 KiB-aligned window starting with
// MD_SB_MAGIC in either byte order, at the usual locations (start, 4 KiB,
// 1.0 and 0.90 positions from the end) or anywhere in files up to 16 MiB.
// Works, returning nothing, when no fixtures exist yet.
func fixtureSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, root := range []string{"../testdata", "testdata"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || len(seeds) >= 200 {
				return nil
			}
			if filepath.Base(filepath.Dir(p)) == "FuzzParse" || filepath.Base(filepath.Dir(p)) == "FuzzParse090" {
				return nil // the fuzz corpus is seeded by go test itself
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			size := info.Size()
			var offs []int64
			if size <= 16<<20 {
				for o := int64(0); o < size; o += 4096 {
					offs = append(offs, o)
				}
			} else {
				offs = append(offs, 0, 4096, int64(Offset090(uint64(size))))
				if o, err := Offset(0, uint64(size)/512); err == nil {
					offs = append(offs, int64(o)*512)
				}
			}
			buf := make([]byte, AreaSize)
			for _, o := range offs {
				n, err := f.ReadAt(buf, o)
				if err != nil && err != io.EOF {
					continue
				}
				if n < 4 {
					continue
				}
				m := binary.LittleEndian.Uint32(buf)
				if m == Magic || m == magicSwapped {
					seeds = append(seeds, append([]byte(nil), buf[:n]...))
				}
			}
			return nil
		})
	}
	return seeds
}

// syntheticSeeds covers every minor, the 0.90 format in both byte orders,
// TV1 and a few broken variants.
func syntheticSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{tv1(t)}
	for minor := 0; minor <= 2; minor++ {
		sb := mkSB(minor)
		seeds = append(seeds, sb.MarshalWithChecksum())
		sb.FeatureMap = FeatureBitmapOffset | FeatureBadBlocks | FeatureReshapeActive | FeatureNewOffset
		sb.BitmapOffset, sb.NewOffset, sb.DeltaDisks = 8, -1024, -1
		seeds = append(seeds, sb.MarshalWithChecksum())
		sb.MaxDev = 1921
		seeds = append(seeds, sb.Marshal())
	}
	for _, big := range []bool{false, true} {
		sb := mk090()
		sb.BigEndian = big
		seeds = append(seeds, sb.MarshalWithChecksum())
	}
	return seeds
}

// checkErrTree asserts that err is nil or made only of *FormatError leaves
// with sane offsets and a rule sentinel.
func checkErrTree(t *testing.T, err error, limit int64) {
	t.Helper()
	for _, fe := range formatErrors(t, err) {
		if fe.Offset < 0 || fe.Offset >= limit {
			t.Fatalf("error offset %#x outside [0,%#x): %v", fe.Offset, limit, fe)
		}
		if fe.Err == nil || fe.Field == "" || fe.Msg == "" {
			t.Fatalf("incomplete FormatError %#v", fe)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range append(syntheticSeeds(f), fixtureSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := Parse(b)
		if sb == nil {
			switch {
			case len(b) < HeaderSize:
				if err != ErrShort {
					t.Fatalf("short input: %v", err)
				}
			case binary.LittleEndian.Uint32(b) != Magic:
				if err != ErrBadMagic {
					t.Fatalf("no magic: %v", err)
				}
			default:
				t.Fatalf("nil superblock with magic: %v", err)
			}
			return
		}
		checkErrTree(t, err, HeaderSize+2*MaxDevs)
		// The helpers must cope with whatever was decoded.
		for _, dev := range []uint64{0, 23, 24, 204800, sb.SuperOffset + 16, ^uint64(0)} {
			err := sb.CheckDevice(dev)
			if dev < MinDevSectors {
				if !errors.Is(err, ErrDeviceTooSmall) {
					t.Fatalf("CheckDevice(%d) = %v", dev, err)
				}
				continue
			}
			checkErrTree(t, err, HeaderSize+2*MaxDevs)
			vsb, verr := Validate(b, dev)
			if vsb == nil {
				t.Fatalf("Validate(%d) returned no superblock: %v", dev, verr)
			}
			checkErrTree(t, verr, HeaderSize+2*MaxDevs)
			if (verr == nil) != (err == nil && sb.RaidDisks <= MaxDevs && func() bool { _, e := Parse(b); return e == nil }()) {
				t.Fatalf("Validate(%d) = %v, Parse and CheckDevice disagree", dev, verr)
			}
		}
		_ = sb.Minor() + int(sb.Role()) + sb.SlotCount(uint64(sb.RaidDisks))
		_ = sb.CountRoles()
		_ = sb.SlotCounts(min(sb.StateSlots(), 4096))
		_ = sb.NewDataOffset()
		_ = sb.Name()
		_ = FormatUUID(sb.SetUUID)
		m := sb.Marshal()
		// Everything decoded is re-encoded byte for byte.
		if n := sb.EncodedSize(); n <= len(b) && n <= AreaSize {
			if !bytes.Equal(m[:n], b[:n]) {
				t.Fatalf("Marshal(Parse(b)) differs in the first %d bytes", n)
			}
		}
		if err != nil {
			return
		}
		// A clean parse survives a round trip unchanged.
		sb2, err2 := Parse(m)
		if err2 != nil {
			t.Fatalf("re-parse of a clean superblock: %v", err2)
		}
		if !reflect.DeepEqual(sb, sb2) {
			t.Fatalf("round trip changed the superblock:\n%+v\n%+v", sb, sb2)
		}
		if Checksum(m) != sb.Checksum {
			t.Fatal("checksum changed in the round trip")
		}
	})
}

func FuzzParse090(f *testing.F) {
	for _, s := range append(syntheticSeeds(f), fixtureSeeds(f)...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := Parse090(b)
		if sb == nil {
			if len(b) < Size090 && err != ErrShort || len(b) >= Size090 && err != ErrBadMagic {
				t.Fatalf("nil superblock: %v", err)
			}
			return
		}
		checkErrTree(t, err, Size090)
		if sb.BigEndian != errors.Is(err, ErrByteSwapped) {
			t.Fatalf("BigEndian %v but error %v", sb.BigEndian, err)
		}
		_ = FormatUUID(sb.UUID())
		_ = sb.Events() + sb.CPEvents()
		for _, dev := range []uint64{MinDevBytes090, 100 << 20, ^uint64(0)} {
			checkErrTree(t, sb.CheckDevice(dev), Size090)
		}
		// All 4096 bytes are represented: the round trip is exact, damaged or not.
		m := sb.Marshal()
		if !bytes.Equal(m, b[:Size090]) {
			t.Fatal("Marshal(Parse090(b)) != b")
		}
		if (err == nil || !errors.Is(err, ErrChecksum)) && Checksum090(m, sb.BigEndian) != sb.Checksum {
			t.Fatal("no checksum error reported for a bad checksum")
		}
	})
}

// bbUnion normalises ranges to whole blocks, sorted and merged.
func bbUnion(list []BadBlock, shift uint8) [][2]uint64 {
	var rs [][2]uint64
	for _, b := range list {
		if b.Len == 0 {
			continue
		}
		s, e := b.Start>>shift, (b.Start+b.Len+(1<<shift)-1)>>shift
		rs = append(rs, [2]uint64{s, e})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	var out [][2]uint64
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r[0] <= out[k][1] {
			out[k][1] = max(out[k][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

func FuzzParseBadBlocks(f *testing.F) {
	f.Add(bbLog(1000<<10|8, 5000<<10|512), uint8(0))
	f.Add(bbLog(1<<10|1, 1<<10|1023, 3<<10|1), uint8(3))
	f.Add([]byte{1, 2, 3}, uint8(9))
	f.Fuzz(func(t *testing.T, b []byte, shift uint8) {
		list, err := ParseBadBlocks(b, shift)
		checkErrTree(t, err, int64(len(b))+1)
		if len(list) > len(b)/8 {
			t.Fatalf("%d entries from %d bytes", len(list), len(b))
		}
		if shift > 20 {
			return
		}
		for _, bb := range list {
			if bb.Start+bb.Len < bb.Start || (bb.Start+bb.Len)>>shift >= 1<<54 {
				return // beyond what the encoder can store
			}
		}
		// Re-encoding covers exactly the same blocks.
		enc, err := MarshalBadBlocks(list, shift, 8*max(len(list)*3, 1))
		if err != nil {
			t.Fatalf("MarshalBadBlocks: %v", err)
		}
		back, err := ParseBadBlocks(enc, shift)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if !reflect.DeepEqual(bbUnion(list, shift), bbUnion(back, shift)) {
			t.Fatalf("coverage changed: %v -> %v", list, back)
		}
	})
}
