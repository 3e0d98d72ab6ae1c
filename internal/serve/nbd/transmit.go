package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mdtool/internal/serve/export"
)

// request is one transmission request from read to reply. Requests live in
// a per-connection array and cycle through the free list, so the steady
// state allocates nothing.
type request struct {
	cookie uint64
	off    uint64
	length uint32
	typ    uint16
	flags  uint16

	errno uint32
	msg   string  // static error message for structured error chunks
	data  *buffer // READ and WRITE payload
	n     int     // READ: bytes read before an error
	held  int64   // bytes of the connection's budget
	gheld int64   // bytes of the shared budget
	rheld int64   // bytes of the connection's reserve
	w     waiter  // for waiting on either
}

// reserveBytes is each connection's own budget for requests of at most
// that size when the shared budget is spent, so that a client is served
// (with up to this much in flight) while others hold the shared budget; in
// flight over all connections are at most Limits' bytes plus reserveBytes
// per connection.
const reserveBytes = 1 << 20

// transmission is the state of a connection in the transmission phase.
type transmission struct {
	c          *conn
	x          *exp
	be         export.Backend
	log        *slog.Logger
	size       uint64
	min        uint64
	maxLen     uint32 // longest READ or WRITE accepted
	discardMax uint32 // longest refused WRITE payload read and dropped instead of disconnecting
	structured bool

	free    chan *request
	work    chan *request
	replies chan *request
	budget  *budget // this connection's
	shared  *budget // every connection's (Limits)
	reserve *budget // this connection's, for small requests when shared is spent

	// inlineMax is the longest READ or WRITE the reader may execute itself
	// (0: never); fastNs is a moving average of how long such requests
	// took in the Backend, wherever they ran.
	inlineMax uint32
	fastNs    atomic.Int64
	// The goroutine that reads requests (one at a time; see inline):
	// br and seq belong to it. inlineState is seq<<1|1 while it executes
	// request number seq itself; the watchdog clears the low bit when it
	// hands reading over to a new goroutine.
	br          *bufio.Reader
	seq         uint64
	heldBack    bool // an inline reply may wait in the write buffer
	inlineState atomic.Uint64
	readers     sync.WaitGroup
	readErr     chan error

	// writer state, guarded by wmu: the writer goroutine sends the
	// replies of workers; the reader sends those of the requests it
	// executes itself.
	wmu  sync.Mutex
	wbuf []byte
	iov  net.Buffers
	werr error
}

const (
	readBufSize  = 128 << 10
	inlineData   = 16 << 10 // reply data up to this size is copied into the write buffer
	flushAtBytes = 64 << 10 // the write buffer is flushed when it grows past this
)

func (c *conn) transmit(x *exp, log *slog.Logger) error {
	cfg := &c.s.cfg
	t := &transmission{
		c:          c,
		x:          x,
		be:         x.Backend,
		log:        log,
		size:       uint64(x.Backend.Size()),
		min:        uint64(x.min),
		maxLen:     x.max,
		structured: c.structured,
		free:       make(chan *request, cfg.MaxInFlight),
		work:       make(chan *request, cfg.MaxInFlight),
		replies:    make(chan *request, cfg.MaxInFlight),
		budget:     newBudget(cfg.MaxInFlightBytes),
		shared:     cfg.Limits.mem,
		reserve:    newBudget(reserveBytes),
		wbuf:       make([]byte, 0, flushAtBytes+inlineData+64),
		inlineMax:  uint32(cfg.InlineMax),
	}
	if !c.negotiated {
		// A client that did not ask for block sizes may use the default
		// maximum payload of 32 MiB.
		t.maxLen = max(t.maxLen, defaultMaxLength)
	}
	t.discardMax = max(t.maxLen, defaultMaxLength)
	slots := make([]request, cfg.MaxInFlight)
	for i := range slots {
		t.free <- &slots[i]
	}
	c.mu.Lock()
	c.tx = t
	c.mu.Unlock()
	writerDone := make(chan struct{})
	go t.writer(writerDone)
	var workers sync.WaitGroup
	for i := 0; i < cfg.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for r := range t.work {
				t.timedExec(r)
				t.replies <- r
			}
		}()
	}
	t.br = bufio.NewReaderSize(c.rw, readBufSize)
	t.readErr = make(chan error, 1)
	t.readers.Add(1)
	go t.readLoop()
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	if t.inlineMax > 0 {
		go t.watchdog(stopWatch, watchDone)
	} else {
		close(watchDone)
	}
	err := <-t.readErr
	// Readers that were relieved still finish their request.
	t.readers.Wait()
	close(stopWatch)
	<-watchDone
	close(t.work)
	workers.Wait()
	close(t.replies)
	<-writerDone
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	switch {
	case err == nil, isEOF(err):
		return nil
	case closing && errors.Is(err, os.ErrDeadlineExceeded):
		return ErrServerClosed
	}
	if t.werr == nil {
		log.Info("nbd: connection ended", "err", err)
	}
	return err
}

// readLoop runs reader and reports how reading ended, unless another
// goroutine took reading over.
func (t *transmission) readLoop() {
	defer t.readers.Done()
	if relieved, err := t.reader(); !relieved {
		t.readErr <- err
	}
}

// watchdog hands reading over to a new goroutine when the reader has been
// executing the same request for a whole tick, so that a slow request run
// inline never holds up those behind it. It ticks every millisecond while
// requests come, less often (up to 16 ms) while the connection is idle.
func (t *transmission) watchdog(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	const fast, slow = time.Millisecond, 16 * time.Millisecond
	d := fast
	tm := time.NewTimer(d)
	defer tm.Stop()
	var last uint64
	for {
		select {
		case <-stop:
			return
		case <-tm.C:
		}
		st := t.inlineState.Load()
		switch {
		case st&1 != 0 && st == last:
			if t.inlineState.CompareAndSwap(st, st&^1) {
				t.readers.Add(1)
				go t.readLoop()
				// Replies the relieved reader held back for a batch.
				t.flushLocked()
			}
			d = fast
		case st != last:
			d = fast
		default:
			d = min(2*d, slow)
		}
		last = st
		tm.Reset(d)
	}
}

// reader reads requests until NBD_CMD_DISC (nil), EOF, a protocol violation
// or Server.Close; relieved reports that the watchdog handed reading to
// another goroutine while this one executed a request.
func (t *transmission) reader() (relieved bool, err error) {
	br := t.br
	var h [requestSize]byte
	for {
		if t.c.dropped.Load() {
			// Requests already buffered would only hold budget.
			return false, net.ErrClosed
		}
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return false, err
		}
		if m := binary.BigEndian.Uint32(h[0:]); m != magicRequest {
			return false, fmt.Errorf("nbd: bad request magic %#x", m)
		}
		r := <-t.free
		r.flags = binary.BigEndian.Uint16(h[4:])
		r.typ = binary.BigEndian.Uint16(h[6:])
		r.cookie = binary.BigEndian.Uint64(h[8:])
		r.off = binary.BigEndian.Uint64(h[16:])
		r.length = binary.BigEndian.Uint32(h[24:])
		if r.typ == cmdDisc {
			t.free <- r
			return false, nil
		}
		r.errno, r.msg = t.check(r)
		if r.errno != 0 {
			if r.typ == cmdWrite {
				if r.length > t.discardMax {
					t.replies <- r
					return false, fmt.Errorf("nbd: refused write payload of %d bytes: disconnecting", r.length)
				}
				t.c.rseq.Add(1)
				if _, err := io.CopyN(io.Discard, br, int64(r.length)); err != nil {
					t.free <- r
					return false, err
				}
				t.c.rseq.Add(1)
			} else {
				t.c.rseq.Add(2)
			}
			t.replies <- r
			continue
		}
		if (r.typ == cmdRead || r.typ == cmdWrite) && r.length > 0 {
			n := bufCap(int(r.length))
			r.held = t.budget.acquire(n, &r.w)
			switch {
			case n > reserveBytes:
				r.gheld = t.shared.acquire(n, &r.w)
			case t.shared.tryAcquire(n):
				r.gheld = n
			default:
				// The shared budget is spent (perhaps by clients that do
				// not take their replies): small requests still go
				// through, on this connection's own reserve.
				r.rheld = t.reserve.acquire(n, &r.w)
			}
			r.data = getBuffer(int(r.length))
			if r.typ == cmdWrite {
				t.c.rseq.Add(1)
				if _, err := io.ReadFull(br, r.data.Bytes()); err != nil {
					t.recycle(r)
					return false, err
				}
				t.c.rseq.Add(1)
			} else {
				t.c.rseq.Add(2)
			}
		} else {
			t.c.rseq.Add(2)
		}
		if t.inline(r) {
			// Once inlineState says busy, t.seq, t.br and t.heldBack
			// may belong to a new reader.
			t.seq++
			seq := t.seq
			busy := seq<<1 | 1
			t.inlineState.Store(busy)
			if seq%inlineSample == 0 {
				t.timedExec(r)
			} else {
				t.exec(r)
			}
			kept := t.inlineState.CompareAndSwap(busy, busy&^1)
			t.replyInline(r, !kept)
			if !kept {
				return true, nil
			}
			continue
		}
		if t.heldBack {
			// The request turned out not to be inline after all.
			t.flushLocked()
			t.heldBack = false
		}
		t.work <- r
	}
}

// Requests are executed by the reader itself, without handing them to a
// worker goroutine and back, while small reads and writes complete in the
// Backend within inlineNs on average (memory, tmpfs or page cache): a
// goroutine hand-off costs more than such a request. Slower Backends
// (devices, O_DIRECT) get the workers, which keep many requests in flight.
const inlineNs = 20_000

// inlineSample: the reader times one in this many of the requests it
// executes (reading the clock costs more than a tenth of such a request).
const inlineSample = 8

// inline says whether the reader executes r itself.
func (t *transmission) inline(r *request) bool {
	return t.inlineable(r.typ, r.flags, r.length)
}

func (t *transmission) inlineable(typ, flags uint16, length uint32) bool {
	return (typ == cmdRead || typ == cmdWrite) && length <= t.inlineMax &&
		flags&cmdFlagFUA == 0 && t.fastNs.Load() < inlineNs
}

// timedExec executes r; for small reads and writes it updates the moving
// average of their Backend time.
func (t *transmission) timedExec(r *request) {
	if (r.typ != cmdRead && r.typ != cmdWrite) || r.length > t.inlineMax || r.flags&cmdFlagFUA != 0 {
		t.exec(r)
		return
	}
	t0 := time.Now()
	t.exec(r)
	d := int64(time.Since(t0))
	// avg += (d - avg) / 8; races between workers only lose an update.
	avg := t.fastNs.Load()
	t.fastNs.Store(avg + (d-avg)/8)
}

// check validates a request; it returns the NBD error and a message.
func (t *transmission) check(r *request) (uint32, string) {
	allowed := uint16(cmdFlagFUA)
	switch r.typ {
	case cmdRead, cmdWrite, cmdFlush, cmdTrim:
	case cmdWriteZeroes:
		allowed |= cmdFlagNoHole
	default:
		return errInval, "unknown command"
	}
	if r.flags&^allowed != 0 {
		return errInval, "command flag not supported for this command"
	}
	writes := r.typ == cmdWrite || r.typ == cmdTrim || r.typ == cmdWriteZeroes
	if writes && t.x.ReadOnly {
		return errPerm, "read-only export"
	}
	if r.typ == cmdFlush {
		if r.off != 0 || r.length != 0 {
			return errInval, "flush offset and length must be zero"
		}
		return 0, ""
	}
	if (r.typ == cmdRead || r.typ == cmdWrite) && r.length > t.maxLen {
		return errInval, "request longer than the maximum payload"
	}
	if r.off > t.size || uint64(r.length) > t.size-r.off {
		if r.typ == cmdWrite || r.typ == cmdWriteZeroes {
			return errNoSpc, "request beyond the end of the export"
		}
		return errInval, "request beyond the end of the export"
	}
	if (r.off|uint64(r.length))&(t.min-1) != 0 {
		return errInval, "request not aligned to the minimum block size"
	}
	return 0, ""
}

// exec runs a validated request against the Backend.
func (t *transmission) exec(r *request) {
	off := int64(r.off)
	n := int64(r.length)
	fua := r.flags&cmdFlagFUA != 0
	var err error
	switch r.typ {
	case cmdRead:
		if n == 0 {
			return
		}
		var k int
		k, err = t.be.ReadAt(r.data.Bytes(), off)
		if err == nil && k < len(r.data.Bytes()) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			// Report the bytes read before the error, in whole blocks.
			k = max(0, min(k, len(r.data.Bytes())-1))
			r.n = k - k%int(t.min)
		}
	case cmdWrite:
		if n == 0 {
			break
		}
		var k int
		if fua {
			k, err = t.be.WriteAtFUA(r.data.Bytes(), off)
		} else {
			k, err = t.be.WriteAt(r.data.Bytes(), off)
		}
		if err == nil && k < len(r.data.Bytes()) {
			err = io.ErrShortWrite
		}
		t.recycleData(r)
	case cmdFlush:
		err = t.be.Flush()
	case cmdTrim:
		if n == 0 {
			break
		}
		if err = t.be.Discard(off, n); err == nil && fua {
			err = t.be.Flush()
		}
	case cmdWriteZeroes:
		if n == 0 {
			break
		}
		if err = t.be.WriteZeroes(off, n, r.flags&cmdFlagNoHole == 0); err == nil && fua {
			err = t.be.Flush()
		}
	}
	if err != nil {
		r.errno = errnoOf(err)
		r.msg = opFailed[r.typ]
		t.log.Warn("nbd: request failed", "cmd", cmdName(r.typ), "offset", off, "length", n, "err", err)
	}
}

var opFailed = map[uint16]string{
	cmdRead:        "read failed",
	cmdWrite:       "write failed",
	cmdFlush:       "flush failed",
	cmdTrim:        "trim failed",
	cmdWriteZeroes: "write zeroes failed",
}

func cmdName(typ uint16) string {
	switch typ {
	case cmdRead:
		return "read"
	case cmdWrite:
		return "write"
	case cmdFlush:
		return "flush"
	case cmdTrim:
		return "trim"
	case cmdWriteZeroes:
		return "write-zeroes"
	}
	return fmt.Sprint(typ)
}

// errnoOf maps a Backend error to an NBD error value.
func errnoOf(err error) uint32 {
	var en syscall.Errno
	if errors.As(err, &en) {
		switch en {
		case syscall.EPERM, syscall.EROFS, syscall.EACCES:
			return errPerm
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
			return errNoSpc
		case syscall.EINVAL:
			return errInval
		case syscall.ENOMEM:
			return errNoMem
		case syscall.ESHUTDOWN:
			return errShutdown
		}
	}
	if errors.Is(err, export.ErrRange) {
		return errInval
	}
	return errIO
}

func (t *transmission) recycleData(r *request) {
	if r.data != nil {
		putBuffer(r.data)
		r.data = nil
	}
	t.shared.release(r.gheld)
	t.reserve.release(r.rheld)
	t.budget.release(r.held)
	r.held, r.gheld, r.rheld = 0, 0, 0
}

func (t *transmission) recycle(r *request) {
	t.recycleData(r)
	r.errno, r.msg, r.n = 0, "", 0
	t.free <- r
}

// writer sends replies until the replies channel is closed, batching the
// replies that are ready into one write.
func (t *transmission) writer(done chan<- struct{}) {
	defer close(done)
	for r := range t.replies {
		t.wmu.Lock()
		t.encode(r)
		yielded := false
	drain:
		for {
			select {
			case r, ok := <-t.replies:
				if !ok {
					break drain
				}
				t.encode(r)
			default:
				// Let workers that are about to finish add their replies
				// to this write before paying for a system call.
				if yielded {
					break drain
				}
				yielded = true
				t.wmu.Unlock()
				runtime.Gosched()
				t.wmu.Lock()
			}
		}
		t.flush()
		t.wmu.Unlock()
	}
	t.flushLocked()
}

// replyInline sends the reply to a request the reader executed itself.
// The reply waits in the write buffer only while the next request is
// already buffered whole and will be executed inline too (its reply joins
// the same write); a relieved reader must not look at the read buffer any
// more and always writes.
func (t *transmission) replyInline(r *request, relieved bool) {
	t.wmu.Lock()
	t.encode(r)
	hold := !relieved && t.nextInline()
	if !hold {
		t.flush()
	}
	t.wmu.Unlock()
	if !relieved {
		t.heldBack = hold
	}
}

// nextInline says whether the read buffer holds a whole request that the
// reader will execute itself.
func (t *transmission) nextInline() bool {
	if t.br.Buffered() < requestSize {
		return false
	}
	h, err := t.br.Peek(requestSize)
	if err != nil || binary.BigEndian.Uint32(h[0:]) != magicRequest {
		return false
	}
	flags, typ, length := binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:]), binary.BigEndian.Uint32(h[24:])
	if !t.inlineable(typ, flags, length) {
		return false
	}
	need := requestSize
	if typ == cmdWrite {
		need += int(length)
	}
	return t.br.Buffered() >= need
}

// flushLocked writes what the write buffer holds.
func (t *transmission) flushLocked() {
	t.wmu.Lock()
	t.flush()
	t.wmu.Unlock()
}

func (t *transmission) simpleHeader(errno uint32, cookie uint64) {
	t.wbuf = binary.BigEndian.AppendUint32(t.wbuf, magicSimpleReply)
	t.wbuf = binary.BigEndian.AppendUint32(t.wbuf, errno)
	t.wbuf = binary.BigEndian.AppendUint64(t.wbuf, cookie)
}

func (t *transmission) chunkHeader(flags, typ uint16, cookie uint64, length uint32) {
	t.wbuf = binary.BigEndian.AppendUint32(t.wbuf, magicStructReply)
	t.wbuf = binary.BigEndian.AppendUint16(t.wbuf, flags)
	t.wbuf = binary.BigEndian.AppendUint16(t.wbuf, typ)
	t.wbuf = binary.BigEndian.AppendUint64(t.wbuf, cookie)
	t.wbuf = binary.BigEndian.AppendUint32(t.wbuf, length)
}

// errorChunk appends NBD_REPLY_TYPE_ERROR, or NBD_REPLY_TYPE_ERROR_OFFSET
// when withOffset, as the final chunk.
func (t *transmission) errorChunk(r *request, withOffset bool, offset uint64) {
	typ, extra := uint16(replyTypeError), 0
	if withOffset {
		typ, extra = replyTypeErrorOffset, 8
	}
	t.chunkHeader(replyFlagDone, typ, r.cookie, uint32(6+len(r.msg)+extra))
	t.wbuf = binary.BigEndian.AppendUint32(t.wbuf, r.errno)
	t.wbuf = binary.BigEndian.AppendUint16(t.wbuf, uint16(len(r.msg)))
	t.wbuf = append(t.wbuf, r.msg...)
	if withOffset {
		t.wbuf = binary.BigEndian.AppendUint64(t.wbuf, offset)
	}
}

// encode appends the reply to r to the write buffer (writing large data
// directly) and returns r to the free list.
func (t *transmission) encode(r *request) {
	if len(t.wbuf) >= flushAtBytes {
		t.flush()
	}
	switch {
	case r.typ == cmdRead && t.structured:
		switch {
		case r.errno == 0 && r.length == 0:
			t.chunkHeader(replyFlagDone, replyTypeNone, r.cookie, 0)
		case r.errno == 0:
			t.chunkHeader(replyFlagDone, replyTypeOffsetData, r.cookie, 8+r.length)
			t.wbuf = binary.BigEndian.AppendUint64(t.wbuf, r.off)
			t.payload(r.data.Bytes())
		case r.data != nil: // the Backend failed: report what was read, then where it failed
			if r.n > 0 {
				t.chunkHeader(0, replyTypeOffsetData, r.cookie, 8+uint32(r.n))
				t.wbuf = binary.BigEndian.AppendUint64(t.wbuf, r.off)
				t.payload(r.data.Bytes()[:r.n])
			}
			t.errorChunk(r, true, r.off+uint64(r.n))
		default:
			t.errorChunk(r, false, 0)
		}
	case t.structured && r.errno != 0:
		t.errorChunk(r, false, 0)
	default:
		t.simpleHeader(r.errno, r.cookie)
		if r.typ == cmdRead && r.errno == 0 && r.length > 0 {
			t.payload(r.data.Bytes())
		}
	}
	t.recycle(r)
}

// payload appends data to the write buffer, or writes the buffer and data
// together when data is large.
func (t *transmission) payload(p []byte) {
	if len(p) <= inlineData {
		t.wbuf = append(t.wbuf, p...)
		return
	}
	if t.werr == nil {
		t.iov = append(t.iov[:0], t.wbuf, p)
		t.c.wseq.Add(1)
		_, err := t.iov.WriteTo(t.c.rw)
		t.c.wseq.Add(1)
		t.writeFailed(err)
	}
	t.iov = t.iov[:0]
	t.wbuf = t.wbuf[:0]
}

func (t *transmission) flush() {
	if len(t.wbuf) > 0 && t.werr == nil {
		t.c.wseq.Add(1)
		_, err := t.c.rw.Write(t.wbuf)
		t.c.wseq.Add(1)
		t.writeFailed(err)
	}
	t.wbuf = t.wbuf[:0]
}

// writeFailed records the first write error and closes the socket, which
// stops the reader; replies still queued are dropped.
func (t *transmission) writeFailed(err error) {
	if err == nil || t.werr != nil {
		return
	}
	t.werr = err
	t.c.dropped.Store(true)
	t.c.nc.Close()
	if !isEOF(err) {
		t.log.Info("nbd: write failed", "err", err)
	}
}

// shutdownWriteGrace bounds how long Server.Close waits for a client to take
// its last replies.
const shutdownWriteGrace = 30 * time.Second
