package nbd

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	tSize = 4 << 20
	tMin  = 4096
	tPref = 65536
	tMax  = 1 << 20
)

func transmissionServer(t *testing.T, cfg Config) (*Server, string, *recBackend) {
	t.Helper()
	rb := &recBackend{Backend: newMem(t, tSize, tMin, tPref, tMax)}
	// Give the device recognisable content.
	if _, err := rb.Backend.WriteAt(pattern(tSize, 3), 0); err != nil {
		t.Fatal(err)
	}
	if cfg.Exports == nil {
		cfg.Exports = []Export{{Name: "x", Backend: rb}}
	}
	s, sock := startUnix(t, cfg)
	return s, sock, rb
}

// TestBadRequests sends every kind of invalid request in both reply modes
// and checks the error, that the Backend saw nothing and stayed unchanged,
// and that the connection still works afterwards.
func TestBadRequests(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	orig := snapshot(t, rb)
	type req struct {
		flags, typ uint16
		off        uint64
		length     uint32
		payload    bool // send length bytes of payload
	}
	cases := []struct {
		name  string
		r     req
		errno uint32
	}{
		{"read past end", req{0, cmdRead, tSize, tMin, false}, errInval},
		{"read across end", req{0, cmdRead, tSize - tMin, 2 * tMin, false}, errInval},
		{"read offset overflow", req{0, cmdRead, math.MaxUint64 - tMin + 1, 2 * tMin, false}, errInval},
		{"write past end", req{0, cmdWrite, tSize, tMin, true}, errNoSpc},
		{"write across end", req{0, cmdWrite, tSize - tMin, 2 * tMin, true}, errNoSpc},
		{"write offset overflow", req{0, cmdWrite, math.MaxUint64 - tMin + 1, 2 * tMin, true}, errNoSpc},
		{"zeroes across end", req{0, cmdWriteZeroes, tSize - tMin, 2 * tMin, false}, errNoSpc},
		{"trim across end", req{0, cmdTrim, tSize - tMin, 2 * tMin, false}, errInval},
		{"read misaligned offset", req{0, cmdRead, 512, tMin, false}, errInval},
		{"read misaligned length", req{0, cmdRead, 0, 1000, false}, errInval},
		{"write misaligned offset", req{0, cmdWrite, 512, tMin, true}, errInval},
		{"write misaligned length", req{0, cmdWrite, 0, tMin + 512, true}, errInval},
		{"trim misaligned", req{0, cmdTrim, 512, tMin, false}, errInval},
		{"zeroes misaligned", req{0, cmdWriteZeroes, 0, 512, false}, errInval},
		{"unknown command", req{0, 9, 0, tMin, false}, errInval},
		{"cache not advertised", req{0, cmdCache, 0, tMin, false}, errInval},
		{"block status not negotiated", req{0, cmdBlockStatus, 0, tMin, false}, errInval},
		{"resize not advertised", req{0, 8, 0, 0, false}, errInval},
		{"read with DF", req{cmdFlagDF, cmdRead, 0, tMin, false}, errInval},
		{"read with unknown flag", req{1 << 15, cmdRead, 0, tMin, false}, errInval},
		{"write with NO_HOLE", req{cmdFlagNoHole, cmdWrite, 0, tMin, true}, errInval},
		{"write with REQ_ONE", req{cmdFlagReqOne, cmdWrite, 0, tMin, true}, errInval},
		{"zeroes with FAST_ZERO", req{cmdFlagFastZero, cmdWriteZeroes, 0, tMin, false}, errInval},
		{"trim with NO_HOLE", req{cmdFlagNoHole, cmdTrim, 0, tMin, false}, errInval},
		{"flush with offset", req{0, cmdFlush, tMin, 0, false}, errInval},
		{"flush with length", req{0, cmdFlush, 0, tMin, false}, errInval},
		{"read over max payload", req{0, cmdRead, 0, 2 * tMax, false}, errInval},
		{"write over max payload", req{0, cmdWrite, 0, 2 * tMax, true}, errInval},
	}
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			c := dialRaw(t, "unix", sock)
			c.start("x", structured, infoBlockSize)
			rb.Calls()
			for _, tc := range cases {
				var payload []byte
				if tc.r.payload {
					payload = bytes.Repeat([]byte{0xee}, int(tc.r.length))
				}
				r := c.do(tc.r.flags, tc.r.typ, tc.r.off, tc.r.length, payload)
				if r.errno != tc.errno {
					t.Errorf("%s: errno %d, want %d", tc.name, r.errno, tc.errno)
				}
				if len(r.data) != 0 {
					t.Errorf("%s: error reply carries %d data bytes", tc.name, len(r.data))
				}
				if structured && (r.simple || r.msg == "") {
					t.Errorf("%s: want a structured error chunk with a message (simple=%v, msg=%q)", tc.name, r.simple, r.msg)
				}
				if calls := rb.Calls(); len(calls) != 0 {
					t.Errorf("%s: reached the backend: %q", tc.name, calls)
				}
				// The stream is still in step: a valid write and read work.
				if r := c.do(0, cmdWrite, tMin, tMin, orig[tMin:2*tMin]); r.errno != 0 {
					t.Fatalf("%s: write afterwards: errno %d", tc.name, r.errno)
				}
				if r := c.do(0, cmdRead, tMin, tMin, nil); r.errno != 0 || !bytes.Equal(r.data, orig[tMin:2*tMin]) {
					t.Fatalf("%s: read afterwards: errno %d", tc.name, r.errno)
				}
				rb.Calls()
			}
			mustEqual(t, "device after bad requests", snapshot(t, rb), orig)
		})
	}
}

func TestReadOnlyExport(t *testing.T) {
	rb := &recBackend{Backend: newMem(t, tSize, tMin, tPref, tMax)}
	_, sock := startUnix(t, Config{Exports: []Export{{Backend: rb, ReadOnly: true}}})
	c := dialRaw(t, "unix", sock)
	c.start("", true, infoBlockSize)
	for _, r := range []reply{
		c.do(0, cmdWrite, 0, tMin, make([]byte, tMin)),
		c.do(0, cmdTrim, 0, tMin, nil),
		c.do(0, cmdWriteZeroes, 0, tMin, nil),
	} {
		if r.errno != errPerm {
			t.Errorf("errno %d, want EPERM", r.errno)
		}
	}
	if r := c.do(cmdFlagFUA, cmdRead, 0, tMin, nil); r.errno != 0 {
		t.Fatalf("read: errno %d", r.errno)
	}
	if calls := rb.Calls(); !slices.Equal(calls, []string{"read 0 4096"}) {
		t.Fatalf("backend calls %q", calls)
	}
}

// TestCommands checks what each valid command does to the Backend.
func TestCommands(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			c := dialRaw(t, "unix", sock)
			c.start("x", structured, infoBlockSize)
			rb.Calls()
			data := pattern(3*tMin, 0x40)
			steps := []struct {
				flags, typ uint16
				off        uint64
				length     uint32
				payload    []byte
				calls      []string
			}{
				{0, cmdWrite, 8192, 3 * tMin, data, []string{"write 8192 12288"}},
				{cmdFlagFUA, cmdWrite, 8192, 3 * tMin, data, []string{"writefua 8192 12288"}},
				{0, cmdFlush, 0, 0, nil, []string{"flush"}},
				{0, cmdTrim, 65536, 65536, nil, []string{"discard 65536 65536"}},
				{cmdFlagFUA, cmdTrim, 65536, 65536, nil, []string{"discard 65536 65536", "flush"}},
				{0, cmdWriteZeroes, 131072, 8192, nil, []string{"zeroes 131072 8192 trim=true"}},
				{cmdFlagNoHole, cmdWriteZeroes, 131072, 8192, nil, []string{"zeroes 131072 8192 trim=false"}},
				{cmdFlagNoHole | cmdFlagFUA, cmdWriteZeroes, 131072, 8192, nil, []string{"zeroes 131072 8192 trim=false", "flush"}},
				{cmdFlagFUA, cmdRead, 8192, 3 * tMin, nil, []string{"read 8192 12288"}},
				{0, cmdRead, 0, 0, nil, nil},
				{0, cmdWrite, 0, 0, nil, nil},
				{0, cmdTrim, 0, 0, nil, nil},
				{cmdFlagFUA, cmdFlush, 0, 0, nil, []string{"flush"}},
				{0, cmdRead, tSize - tMax, tMax, nil, []string{fmt.Sprintf("read %d %d", tSize-tMax, tMax)}},
			}
			for i, st := range steps {
				r := c.do(st.flags, st.typ, st.off, st.length, st.payload)
				if r.errno != 0 {
					t.Fatalf("step %d: errno %d", i, r.errno)
				}
				if calls := rb.Calls(); !slices.Equal(calls, st.calls) {
					t.Fatalf("step %d: backend calls %q, want %q", i, calls, st.calls)
				}
				if st.typ == cmdRead {
					if len(r.data) != int(st.length) {
						t.Fatalf("step %d: read %d bytes", i, len(r.data))
					}
					if st.length == 0 && structured && (len(r.chunks) != 1 || r.chunks[0].typ != replyTypeNone) {
						t.Fatalf("zero-length structured read: chunks %+v", r.chunks)
					}
					if structured && st.length > 0 && r.dataOffset != st.off {
						t.Fatalf("data chunk offset %d, want %d", r.dataOffset, st.off)
					}
				}
			}
			r := c.do(0, cmdRead, 8192, 3*tMin, nil)
			mustEqual(t, "read back", r.data, data)
			r = c.do(0, cmdRead, 131072, 8192, nil)
			mustEqual(t, "zeroed range", r.data, make([]byte, 8192))
		})
	}
}

// TestReadErrors checks that a Backend read error is reported without a
// disconnect: structured replies carry the data read before the error and
// its offset; simple replies carry the error and no data.
func TestReadErrors(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	rb.failFrom = 1<<20 + 8192
	want := snapshot(t, rb.Backend)

	c := dialRaw(t, "unix", sock)
	c.start("x", true, infoBlockSize)
	r := c.do(0, cmdRead, 1<<20, 16384, nil)
	if r.errno != errIO || r.errOffset != 1<<20+8192 {
		t.Fatalf("errno %d at offset %d, want EIO at %d", r.errno, r.errOffset, 1<<20+8192)
	}
	if len(r.chunks) != 2 || r.chunks[0].typ != replyTypeOffsetData || r.chunks[0].flags&replyFlagDone != 0 ||
		r.chunks[1].typ != replyTypeErrorOffset || r.chunks[1].flags&replyFlagDone == 0 {
		t.Fatalf("chunks %+v", r.chunks)
	}
	mustEqual(t, "data before the error", r.data, want[1<<20:1<<20+8192])
	// A read failing at its first byte has no data chunk.
	r = c.do(0, cmdRead, 1<<20+8192, 4096, nil)
	if r.errno != errIO || r.errOffset != 1<<20+8192 || len(r.chunks) != 1 {
		t.Fatalf("errno %d offset %d chunks %d", r.errno, r.errOffset, len(r.chunks))
	}
	if r := c.do(0, cmdRead, 0, 4096, nil); r.errno != 0 {
		t.Fatalf("read after error: errno %d", r.errno)
	}

	c = dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	r = c.do(0, cmdRead, 1<<20, 16384, nil)
	if r.errno != errIO || len(r.data) != 0 {
		t.Fatalf("simple: errno %d, %d data bytes", r.errno, len(r.data))
	}
	if r := c.do(0, cmdRead, 0, 4096, nil); r.errno != 0 || !bytes.Equal(r.data, want[:4096]) {
		t.Fatalf("read after error: errno %d", r.errno)
	}
}

// TestOversizedWriteDisconnects checks that a write payload beyond what the
// server reads and drops (32 MiB) gets EINVAL and a hard disconnect, with
// the device unchanged.
func TestOversizedWriteDisconnects(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	orig := snapshot(t, rb)
	c := dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	c.send(0, cmdWrite, 7, 0, 40<<20, make([]byte, 64<<10))
	r := c.readReply(func(uint64) int { return 0 })
	if r.errno != errInval || r.cookie != 7 {
		t.Fatalf("errno %d cookie %d", r.errno, r.cookie)
	}
	c.expectClosed()
	mustEqual(t, "device", snapshot(t, rb), orig)
}

// TestUnnegotiatedLimits: a client that did not ask for block sizes may send
// payloads up to the default 32 MiB; alignment is still enforced.
func TestUnnegotiatedLimits(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{})
	c := dialRaw(t, "unix", sock)
	c.start("x", true) // NBD_OPT_GO without NBD_INFO_BLOCK_SIZE
	data := pattern(2*tMax, 9)
	if r := c.do(0, cmdWrite, 0, 2*tMax, data); r.errno != 0 {
		t.Fatalf("2 MiB write: errno %d", r.errno)
	}
	if r := c.do(0, cmdRead, 0, 2*tMax, nil); r.errno != 0 || !bytes.Equal(r.data, data) {
		t.Fatalf("2 MiB read: errno %d", r.errno)
	}
	if r := c.do(0, cmdRead, 512, 512, nil); r.errno != errInval {
		t.Fatalf("misaligned read: errno %d, want EINVAL", r.errno)
	}
	_ = rb
}

func TestBadRequestMagic(t *testing.T) {
	_, sock, _ := transmissionServer(t, Config{})
	c := dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	c.write(make([]byte, requestSize))
	c.expectClosed()
}

// TestOutOfOrder holds one read in the Backend and checks that a later
// request is answered first: with workers only, and with inline execution,
// where the held read runs in the reader until the watchdog hands reading
// over to another goroutine.
func TestOutOfOrder(t *testing.T) {
	for _, cfg := range []Config{{}, {InlineMax: -1}} {
		t.Run(fmt.Sprintf("InlineMax=%d", cfg.InlineMax), func(t *testing.T) { testOutOfOrder(t, cfg) })
	}
}

func testOutOfOrder(t *testing.T, cfg Config) {
	_, sock, rb := transmissionServer(t, cfg)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	rb.onRead = func(off int64) {
		if off == 65536 {
			close(entered)
			<-release
		}
	}
	c := dialRaw(t, "unix", sock)
	c.start("x", true, infoBlockSize)
	c.send(0, cmdRead, 1, 65536, tMin, nil)
	<-entered
	c.send(0, cmdRead, 2, 0, tMin, nil)
	c.send(0, cmdWrite, 3, 0, tMin, make([]byte, tMin))
	got := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		r := c.readReply(func(cookie uint64) int {
			if cookie == 3 {
				return 0
			}
			return tMin
		})
		if r.cookie == 1 {
			t.Fatal("held read answered first")
		}
		got[r.cookie] = true
	}
	unblock()
	if r := c.readReply(func(uint64) int { return tMin }); r.cookie != 1 || r.errno != 0 || len(r.data) != tMin {
		t.Fatalf("cookie %d errno %d", r.cookie, r.errno)
	}
	if !got[2] || !got[3] {
		t.Fatalf("replies %v", got)
	}
}

// TestMultiConn writes and flushes on one connection and reads on another.
func TestMultiConn(t *testing.T) {
	_, sock, _ := transmissionServer(t, Config{})
	a := dialRaw(t, "unix", sock)
	b := dialRaw(t, "unix", sock)
	if e := a.start("x", true, infoBlockSize); e.flags&tflagCanMultiConn == 0 {
		t.Fatal("CAN_MULTI_CONN not advertised")
	}
	b.start("x", false, infoBlockSize)
	data := pattern(tPref, 77)
	if r := a.do(0, cmdWrite, tPref, tPref, data); r.errno != 0 {
		t.Fatal(r.errno)
	}
	if r := a.do(0, cmdFlush, 0, 0, nil); r.errno != 0 {
		t.Fatal(r.errno)
	}
	mustEqual(t, "read on the other connection", b.do(0, cmdRead, tPref, tPref, nil).data, data)
}

// TestPipelined keeps many requests in flight on several connections and
// checks every reply against a model.
func TestPipelined(t *testing.T) {
	_, sock, rb := transmissionServer(t, Config{Workers: 4, MaxInFlight: 16})
	orig := snapshot(t, rb)
	var wg sync.WaitGroup
	for conn := 0; conn < 3; conn++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, "unix", sock)
			c.start("x", conn%2 == 0, infoBlockSize)
			base := uint64(conn) * (tSize / 4)
			const n = 64
			for i := uint64(0); i < n; i++ {
				c.send(0, cmdWrite, 2*i, base+i*tMin, tMin, pattern(tMin, byte(i)+byte(conn)))
				c.send(0, cmdRead, 2*i+1, base+((i+n/2)%n)*tMin, tMin, nil)
			}
			for i := 0; i < 2*n; i++ {
				r := c.readReply(func(cookie uint64) int {
					if cookie%2 == 1 {
						return tMin
					}
					return 0
				})
				if r.errno != 0 {
					t.Errorf("cookie %d: errno %d", r.cookie, r.errno)
				}
			}
			for i := uint64(0); i < n; i++ {
				r := c.do(0, cmdRead, base+i*tMin, tMin, nil)
				if !bytes.Equal(r.data, pattern(tMin, byte(i)+byte(conn))) {
					t.Errorf("conn %d block %d differs", conn, i)
				}
			}
			c.send(0, cmdDisc, 0, 0, 0, nil)
			c.expectClosed()
		}()
	}
	wg.Wait()
	got := snapshot(t, rb)
	mustEqual(t, "untouched last quarter", got[3*tSize/4:], orig[3*tSize/4:])
}

// TestInlineTakeovers pipelines reads and writes on a Backend whose
// requests are mostly fast and sometimes held for milliseconds, so that
// the reader executes requests itself, the watchdog hands reading over
// and the server falls back to workers and returns to inline execution:
// every request gets its reply with the right data, and no goroutine is
// left behind when the connection closes.
func TestInlineTakeovers(t *testing.T) {
	base := runtime.NumGoroutine()
	s, sock, rb := transmissionServer(t, Config{})
	var n atomic.Int64
	slow := func(int64) {
		if n.Add(1)%97 == 0 {
			time.Sleep(3 * time.Millisecond)
		}
	}
	rb.onRead, rb.onWrite = slow, slow
	c := dialRaw(t, "unix", sock)
	c.start("x", false, infoBlockSize)
	const batch, rounds = 24, 40
	blocks := uint64(tSize / tMin)
	orig := pattern(tSize, 3)
	for round := 0; round < rounds; round++ {
		want := map[uint64][]byte{}
		for i := 0; i < batch; i++ {
			cookie := uint64(round*batch + i)
			// Writes go to the first half, reads to the second (untouched).
			if i%2 == 0 {
				off := (cookie % (blocks / 2)) * tMin
				c.send(0, cmdWrite, cookie, off, tMin, pattern(tMin, byte(cookie)))
				want[cookie] = nil
			} else {
				off := (blocks/2 + cookie%(blocks/2)) * tMin
				c.send(0, cmdRead, cookie, off, tMin, nil)
				want[cookie] = orig[off : off+tMin]
			}
		}
		for i := 0; i < batch; i++ {
			r := c.readReply(func(cookie uint64) int {
				if want[cookie] == nil {
					return 0
				}
				return tMin
			})
			w, ok := want[r.cookie]
			if !ok || r.errno != 0 || !bytes.Equal(r.data, w) {
				t.Fatalf("round %d: reply to %d: known %v, errno %d, data ok %v", round, r.cookie, ok, r.errno, bytes.Equal(r.data, w))
			}
			delete(want, r.cookie)
		}
	}
	c.nc.Close()
	s.Close()
	waitGoroutines(t, base+2)
}
