package r5log

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a journal member image written by Linux 6.1 + mdadm 4.2
// (testdata/README.md says how), with the few v1.2 superblock fields the
// tests need, parsed here directly (struct mdp_superblock_1 at 4096).
type fixture struct {
	img        []byte
	uuid       [16]byte
	level      int
	layout     int
	chunk      uint64 // sectors
	raidDisks  int
	dataOffset uint64
	dataSize   uint64
	tail       uint64 // journal_tail (shares recovery_offset's slot)
	events     uint64
	resync     uint64
}

func loadFixture(t testing.TB, name string) *fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	img, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	sb := img[4096:]
	if binary.LittleEndian.Uint32(sb) != 0xa92b4efc {
		t.Fatalf("%s: no v1.2 superblock", name)
	}
	fx := &fixture{
		img:        img,
		level:      int(int32(binary.LittleEndian.Uint32(sb[72:]))),
		layout:     int(binary.LittleEndian.Uint32(sb[76:])),
		chunk:      uint64(binary.LittleEndian.Uint32(sb[88:])),
		raidDisks:  int(binary.LittleEndian.Uint32(sb[92:])),
		dataOffset: binary.LittleEndian.Uint64(sb[128:]),
		dataSize:   binary.LittleEndian.Uint64(sb[136:]),
		tail:       binary.LittleEndian.Uint64(sb[152:]),
		events:     binary.LittleEndian.Uint64(sb[200:]),
		resync:     binary.LittleEndian.Uint64(sb[208:]),
	}
	copy(fx.uuid[:], sb[16:32])
	return fx
}

// logArea returns the journal's log area: byte 0 = data_offset.
func (fx *fixture) logArea() []byte {
	return fx.img[fx.dataOffset*512 : (fx.dataOffset+fx.dataSize)*512]
}

func (fx *fixture) seed() uint32 { return Seed(fx.uuid) }

func (fx *fixture) maxDegraded() int {
	if fx.level == 6 {
		return 2
	}
	return 1
}

// block returns the 4 KiB log block at sector s.
func (fx *fixture) block(s uint64) []byte {
	return fx.logArea()[s*512 : s*512+BlockSize]
}

// mapper is raid5_compute_sector (previous=0) for the left-symmetric
// layouts the fixtures use (raid5 and raid6, ALGORITHM_LEFT_SYMMETRIC).
func (fx *fixture) mapper() Mapper {
	n := uint64(fx.raidDisks)
	data := n - uint64(fx.maxDegraded())
	chunk := fx.chunk
	level := fx.level
	return func(r uint64) (uint64, int) {
		off := r % chunk
		chunkNr := r / chunk
		stripe := chunkNr / data
		dd := chunkNr % data
		var pd uint64
		if level == 6 {
			pd = n - 1 - stripe%n
			dd = (pd + 2 + dd) % n
		} else {
			pd = data - stripe%n
			dd = (pd + 1 + dd) % n
		}
		return stripe*chunk + off, int(dd)
	}
}

// pdIdx returns the parity member of a stripe sector (left-symmetric).
func (fx *fixture) pdIdx(sect uint64) int {
	n := uint64(fx.raidDisks)
	stripe := sect / fx.chunk
	if fx.level == 6 {
		return int(n - 1 - stripe%n)
	}
	return int(n - uint64(fx.maxDegraded()) - stripe%n)
}

func (fx *fixture) params() Params {
	return Params{
		DevSectors:  fx.dataSize,
		Tail:        fx.tail,
		Seed:        fx.seed(),
		MaxDegraded: fx.maxDegraded(),
		Map:         fx.mapper(),
	}
}

// dmesgLine returns the recovery line of a saved kernel log.
func dmesgLine(t testing.TB, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "recovering") || strings.Contains(l, "clean shutdown") {
			return l
		}
	}
	t.Fatalf("%s: no recovery line", name)
	return ""
}

// patternBlock returns the array's 4 KiB block number k of the pattern the
// fixtures wrote ("fN block K pattern" padded with spaces, then '\n').
func patternBlock(tag string, k int) []byte {
	b := bytes.Repeat([]byte{' '}, BlockSize)
	copy(b, tag+" block "+itoa(k)+" pattern")
	b[BlockSize-1] = '\n'
	return b
}

func itoa(k int) string {
	if k == 0 {
		return "0"
	}
	var d []byte
	for ; k > 0; k /= 10 {
		d = append([]byte{byte('0' + k%10)}, d...)
	}
	return string(d)
}
