// The race detector makes sync.Pool drop items on purpose, so pooled
// buffers are reallocated at random: this test only means something
// without it.

//go:build !race

package nbd

import (
	"encoding/binary"
	"io"
	"runtime"
	"testing"
)

// TestSteadyStateAllocations checks that serving requests allocates
// nothing per request once buffers are pooled: a lean client pipelines
// batches of 4 KiB writes and reads and the process's malloc count is
// compared with the number of requests.
func TestSteadyStateAllocations(t *testing.T) {
	m := newMem(t, tSize, 512, 4096, tMax)
	_, sock := startUnix(t, Config{Exports: []Export{{Backend: m}}})
	for _, structured := range []bool{false, true} {
		c := dialRaw(t, "unix", sock)
		c.start("", structured, infoBlockSize)
		nc := c.nc
		const batch = 32
		var reqs []byte
		for i := 0; i < batch; i++ {
			typ := uint16(cmdRead)
			if i%2 == 0 {
				typ = cmdWrite
			}
			h := binary.BigEndian.AppendUint32(nil, magicRequest)
			h = binary.BigEndian.AppendUint16(h, 0)
			h = binary.BigEndian.AppendUint16(h, typ)
			h = binary.BigEndian.AppendUint64(h, uint64(i))
			h = binary.BigEndian.AppendUint64(h, uint64(i)*4096)
			h = binary.BigEndian.AppendUint32(h, 4096)
			reqs = append(reqs, h...)
			if typ == cmdWrite {
				reqs = append(reqs, make([]byte, 4096)...)
			}
		}
		// Replies: simple 16 bytes (+4096 for reads); structured reads are
		// a 20-byte chunk header, 8-byte offset and the data.
		replyBytes := batch/2*16 + batch/2*(16+4096)
		if structured {
			replyBytes = batch/2*16 + batch/2*(20+8+4096)
		}
		replies := make([]byte, replyBytes)
		round := func() {
			c.deadline()
			if _, err := nc.Write(reqs); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(nc, replies); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 50; i++ {
			round()
		}
		const rounds = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < rounds; i++ {
			round()
		}
		runtime.ReadMemStats(&after)
		perReq := float64(after.Mallocs-before.Mallocs) / (rounds * batch)
		t.Logf("structured=%v: %.3f allocations per request", structured, perReq)
		if perReq > 0.1 {
			t.Errorf("structured=%v: %.3f allocations per request, want none in the steady state", structured, perReq)
		}
	}
}
