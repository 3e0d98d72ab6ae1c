package nbdclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var timeZero time.Time

// Options tune a client.
type Options struct {
	// Conns is the number of connections (default 1); more are opened
	// only when the server advertises NBD_FLAG_CAN_MULTI_CONN.
	Conns int
	// Timeout fails the client when a request has had no reply for this
	// long (0: 30 s; negative: never).
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Errors.
var (
	// ErrTimeout: a request got no reply within the timeout; the client
	// is failed and every request returns an error from now on.
	ErrTimeout = errors.New("nbd: no reply within the timeout")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("nbd: client closed")
	// ErrConnLost: the connection to the server broke (the server is gone,
	// the link is down, or it broke the protocol).
	ErrConnLost = errors.New("nbd: connection to the server lost")
	// ErrReadOnly: the export is read-only.
	ErrReadOnly = errors.New("nbd: export is read-only")
	// ErrProtocol: the server broke the protocol.
	ErrProtocol = errors.New("nbd: protocol error")
)

// RemoteError is an error the server replied with.
type RemoteError struct {
	Op    string
	Off   int64
	Errno syscall.Errno
	Msg   string // the server's message (structured replies), if any
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("nbd %s at %d: %v", e.Op, e.Off, e.Errno)
	if e.Msg != "" {
		s += " (" + e.Msg + ")"
	}
	return s
}

func (e *RemoteError) Unwrap() error { return e.Errno }

// Client is an open NBD export. All methods are safe for concurrent use.
type Client struct {
	uri     *URI
	ex      export
	conns   []*conn
	rr      atomic.Uint32
	timeout time.Duration
	failed  atomic.Pointer[error]
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  atomic.Bool
	latency atomic.Int64 // ns, moving average of reply times

	base      time.Time    // the watchdog's clock: lastReply is ns since base
	lastReply atomic.Int64 // when a reply (or reply chunk) last arrived
	probing   atomic.Bool  // a liveness probe is in flight (watchdog.go)
	probeBuf  []byte
	lost      chan struct{} // closed by fail
}

// Latency is the recent reply time of the server: an exponentially
// weighted moving average (1/8 weight per request) of the time from
// sending a request to its reply.
func (c *Client) Latency() time.Duration { return time.Duration(c.latency.Load()) }

func (c *Client) observe(d time.Duration) {
	for {
		old := c.latency.Load()
		nv := int64(d)
		if old != 0 {
			nv = old + (int64(d)-old)/8
		}
		if c.latency.CompareAndSwap(old, nv) {
			return
		}
	}
}

// Dial opens the export u names.
func Dial(ctx context.Context, u *URI, o Options) (*Client, error) {
	tc, err := tlsConfig(u)
	if err != nil {
		return nil, err
	}
	nc, ex, err := dialOne(ctx, u, tc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	c := &Client{uri: u, ex: *ex, timeout: o.Timeout, stop: make(chan struct{}), base: time.Now(), lost: make(chan struct{})}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	c.conns = append(c.conns, newConn(c, nc, ex.structured))
	if ex.tflags&tflagCanMultiConn != 0 {
		for i := 1; i < o.Conns; i++ {
			nc, ex2, err := dialOne(ctx, u, tc)
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("%s: connection %d: %w", u, i+1, err)
			}
			c.conns = append(c.conns, newConn(c, nc, ex2.structured))
		}
	}
	for _, cn := range c.conns {
		c.wg.Add(1)
		go cn.readLoop()
	}
	if c.timeout > 0 {
		c.wg.Add(1)
		go c.watchdog()
	}
	return c, nil
}

// URI is the URI the client was opened with.
func (c *Client) URI() *URI { return c.uri }

// Size is the export's size in bytes.
func (c *Client) Size() int64 { return int64(c.ex.size) }

// BlockSizes are the server's minimum, preferred and maximum block sizes
// (the protocol defaults when it did not say).
func (c *Client) BlockSizes() (min, pref, max uint32) {
	return c.ex.minBlock, c.ex.prefBlock, c.ex.maxBlock
}

// ReadOnly reports whether the export refuses writes.
func (c *Client) ReadOnly() bool { return c.ex.tflags&tflagReadOnly != 0 }

// Conns is the number of connections in use.
func (c *Client) Conns() int { return len(c.conns) }

// Failed is closed when the client fails (or is closed); Err says why.
func (c *Client) Failed() <-chan struct{} { return c.lost }

// Err is the error that failed the client, or nil while it works.
func (c *Client) Err() error {
	if p := c.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the first error and closes every connection, which ends
// every pending request with it.
func (c *Client) fail(err error) {
	if c.failed.CompareAndSwap(nil, &err) {
		for _, cn := range c.conns {
			cn.abort(err)
		}
		if c.lost != nil {
			close(c.lost)
		}
	}
}

// Close ends the session (NBD_CMD_DISC) and the connections.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.Err() == nil {
		for _, cn := range c.conns {
			cn.disconnect()
		}
	}
	c.fail(ErrClosed)
	close(c.stop)
	c.wg.Wait()
	return nil
}

func (c *Client) pick() *conn {
	if len(c.conns) == 1 {
		return c.conns[0]
	}
	return c.conns[int(c.rr.Add(1))%len(c.conns)]
}

// ReadAt reads len(p) bytes at off.
func (c *Client) ReadAt(p []byte, off int64) (int, error) {
	if err := c.span(off, len(p)); err != nil {
		return 0, err
	}
	max := int(c.ex.maxBlock)
	if len(p) <= max {
		if err := c.do(cmdRead, 0, off, p, nil); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.split(p, off, func(q []byte, o int64) error { return c.do(cmdRead, 0, o, q, nil) })
}

// WriteAt writes p at off.
func (c *Client) WriteAt(p []byte, off int64) (int, error) {
	return c.write(p, off, 0)
}

// WriteAtFUA writes p at off, durable when it returns.
func (c *Client) WriteAtFUA(p []byte, off int64) (int, error) {
	if c.ex.tflags&tflagSendFUA == 0 {
		n, err := c.write(p, off, 0)
		if err == nil {
			err = c.Flush()
		}
		return n, err
	}
	return c.write(p, off, cmdFlagFUA)
}

func (c *Client) write(p []byte, off int64, flags uint16) (int, error) {
	if c.ReadOnly() {
		return 0, ErrReadOnly
	}
	if err := c.span(off, len(p)); err != nil {
		return 0, err
	}
	if len(p) <= int(c.ex.maxBlock) {
		if err := c.do(cmdWrite, flags, off, nil, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.split(p, off, func(q []byte, o int64) error { return c.do(cmdWrite, flags, o, nil, q) })
}

// split issues a request larger than the server's maximum in pieces, all
// in flight at once.
func (c *Client) split(p []byte, off int64, op func([]byte, int64) error) (int, error) {
	max := int(c.ex.maxBlock)
	max -= max % int(c.ex.minBlock)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for i := 0; i < len(p); i += max {
		q := p[i:min(i+max, len(p))]
		wg.Add(1)
		go func(q []byte, o int64) {
			defer wg.Done()
			if err := op(q, o); err != nil {
				first.CompareAndSwap(nil, &err)
			}
		}(q, off+int64(i))
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, *e
	}
	return len(p), nil
}

// Flush makes every completed write durable.
func (c *Client) Flush() error {
	if c.ex.tflags&tflagSendFlush == 0 {
		return c.Err()
	}
	if c.ex.tflags&tflagCanMultiConn != 0 || len(c.conns) == 1 {
		return c.do(cmdFlush, 0, 0, nil, nil)
	}
	for _, cn := range c.conns {
		if err := cn.do(cmdFlush, 0, 0, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// Discard is a hint that the range is unused (NBD_CMD_TRIM); without
// server support it does nothing.
func (c *Client) Discard(off, n int64) error {
	if c.ex.tflags&tflagSendTrim == 0 || n == 0 {
		return c.Err()
	}
	return c.lengthOp(cmdTrim, 0, off, n)
}

// WriteZeroes makes the range read back as zeroes; mayTrim lets the
// server deallocate it.
func (c *Client) WriteZeroes(off, n int64, mayTrim bool) error {
	if c.ReadOnly() {
		return ErrReadOnly
	}
	if c.ex.tflags&tflagSendWriteZeroes == 0 {
		return c.zeroByWrite(off, n)
	}
	var flags uint16
	if !mayTrim {
		flags = cmdFlagNoHole
	}
	return c.lengthOp(cmdWriteZeroes, flags, off, n)
}

func (c *Client) zeroByWrite(off, n int64) error {
	z := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(z)))
		if _, err := c.write(z[:k], off, 0); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// lengthOp issues a payload-less request over [off, off+n), in pieces of
// at most 2^32 - minBlock bytes.
func (c *Client) lengthOp(typ, flags uint16, off, n int64) error {
	if err := c.span(off, 0); err != nil || off+n > c.Size() {
		return errRange(off, n, c.Size())
	}
	maxLen := int64(1<<32 - int64(c.ex.minBlock))
	for n > 0 {
		k := min(n, maxLen)
		if err := c.pick().doLen(typ, flags, off, uint32(k)); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func (c *Client) span(off int64, n int) error {
	if off < 0 || off+int64(n) > c.Size() {
		return errRange(off, int64(n), c.Size())
	}
	return nil
}

func errRange(off, n, size int64) error {
	return fmt.Errorf("nbd: access at %d length %d beyond the export's %d bytes: %w", off, n, size, syscall.EINVAL)
}

func (c *Client) do(typ, flags uint16, off int64, dst, src []byte) error {
	return c.pick().do(typ, flags, off, dst, src)
}

// call is one request in flight.
type call struct {
	op    uint16
	off   int64
	dst   []byte // READ destination
	start time.Time
	// flush: a healthy server may take long to answer it (the
	// watchdog's policy, watchdog.go)
	flush bool
	err   error
	done  chan struct{}
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// conn is one connection: requests are written under wmu, replies read by
// readLoop and matched to calls by cookie.
type conn struct {
	c          *Client
	nc         net.Conn
	structured bool

	wmu sync.Mutex
	hdr [requestSize]byte
	vec [2][]byte   // header + payload of a write (under wmu)
	out net.Buffers // writev over vec, kept here so that it does not escape per request

	scratch [8]byte // the reply reader's (readLoop's only)

	mu      sync.Mutex
	pending map[uint64]*call
	cookie  uint64
	err     error
}

func newConn(c *Client, nc net.Conn, structured bool) *conn {
	return &conn{c: c, nc: nc, structured: structured, pending: make(map[uint64]*call)}
}

func (cn *conn) do(typ, flags uint16, off int64, dst, src []byte) error {
	n := len(dst)
	if typ == cmdWrite {
		n = len(src)
	}
	return cn.send(typ, flags, off, uint32(n), dst, src)
}

func (cn *conn) doLen(typ, flags uint16, off int64, n uint32) error {
	return cn.send(typ, flags, off, n, nil, nil)
}

func (cn *conn) send(typ, flags uint16, off int64, n uint32, dst, src []byte) error {
	k := callPool.Get().(*call)
	k.op, k.off, k.dst, k.err, k.start = typ, off, dst, nil, time.Now()
	k.flush = typ == cmdFlush
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		callPool.Put(k)
		return err
	}
	cn.cookie++
	cookie := cn.cookie
	cn.pending[cookie] = k
	cn.mu.Unlock()

	cn.wmu.Lock()
	h := cn.hdr[:]
	binary.BigEndian.PutUint32(h[0:], magicRequest)
	binary.BigEndian.PutUint16(h[4:], flags)
	binary.BigEndian.PutUint16(h[6:], typ)
	binary.BigEndian.PutUint64(h[8:], cookie)
	binary.BigEndian.PutUint64(h[16:], uint64(off))
	binary.BigEndian.PutUint32(h[24:], n)
	var err error
	if src != nil {
		cn.vec[0], cn.vec[1] = h, src
		cn.out = cn.vec[:]
		_, err = cn.out.WriteTo(cn.nc)
		cn.vec[1] = nil
	} else {
		_, err = cn.nc.Write(h)
	}
	cn.wmu.Unlock()
	if err != nil {
		cn.c.fail(fmt.Errorf("%s: %w: %v", cn.c.uri, ErrConnLost, err))
	}
	<-k.done
	err = k.err
	if err == nil {
		cn.c.observe(time.Since(k.start))
	}
	k.dst = nil
	callPool.Put(k)
	return err
}

// abort ends the connection: every pending call gets err.
func (cn *conn) abort(err error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = err
	}
	pend := cn.pending
	cn.pending = map[uint64]*call{}
	cn.mu.Unlock()
	if errors.Is(err, ErrClosed) {
		cn.nc.Close()
	} else {
		closeAbortive(cn.nc)
	}
	for _, k := range pend {
		k.err = err
		k.done <- struct{}{}
	}
}

// disconnect sends NBD_CMD_DISC (no reply).
func (cn *conn) disconnect() {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	var h [requestSize]byte
	binary.BigEndian.PutUint32(h[0:], magicRequest)
	binary.BigEndian.PutUint16(h[6:], cmdDisc)
	cn.nc.SetWriteDeadline(time.Now().Add(time.Second))
	cn.nc.Write(h[:])
}

func (cn *conn) take(cookie uint64) *call {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	k := cn.pending[cookie]
	delete(cn.pending, cookie)
	return k
}

func (cn *conn) peek(cookie uint64) *call {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.pending[cookie]
}

func (cn *conn) readLoop() {
	defer cn.c.wg.Done()
	var h [20]byte
	for {
		err := cn.readReply(h[:])
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				err = fmt.Errorf("%s: %w", cn.c.uri, err)
			}
			cn.c.fail(err)
			return
		}
	}
}

// readReply reads one reply (or one structured chunk) and completes its
// call.
func (cn *conn) readReply(h []byte) error {
	if _, err := io.ReadFull(cn.nc, h[:4]); err != nil {
		return fmt.Errorf("%w: %v", ErrConnLost, err)
	}
	cn.c.replied()
	switch binary.BigEndian.Uint32(h) {
	case magicSimpleReply:
		if _, err := io.ReadFull(cn.nc, h[4:16]); err != nil {
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
		errno := binary.BigEndian.Uint32(h[4:])
		k := cn.take(binary.BigEndian.Uint64(h[8:]))
		if k == nil {
			return fmt.Errorf("%w: reply to an unknown request", ErrProtocol)
		}
		if errno == 0 && k.op == cmdRead {
			if _, err := io.ReadFull(cn.nc, k.dst); err != nil {
				k.err = fmt.Errorf("%w: %v", ErrConnLost, err)
				k.done <- struct{}{}
				return k.err
			}
		}
		if errno != 0 {
			k.err = remoteErr(k, errno, "")
		}
		k.done <- struct{}{}
		return nil
	case magicStructReply:
		if !cn.structured {
			return fmt.Errorf("%w: structured reply not negotiated", ErrProtocol)
		}
		if _, err := io.ReadFull(cn.nc, h[4:20]); err != nil {
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
		return cn.chunk(binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:]),
			binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[16:]))
	}
	return fmt.Errorf("%w: bad reply magic", ErrProtocol)
}

// chunk handles one structured reply chunk.
func (cn *conn) chunk(flags, typ uint16, cookie uint64, length uint32) error {
	k := cn.peek(cookie)
	if k == nil {
		return fmt.Errorf("%w: chunk for an unknown request", ErrProtocol)
	}
	scratch := cn.scratch[:]
	switch typ {
	case replyTypeNone:
		if length != 0 {
			return fmt.Errorf("%w: NBD_REPLY_TYPE_NONE with payload", ErrProtocol)
		}
	case replyTypeOffsetData, replyTypeOffsetHole:
		if k.op != cmdRead || length < 8 {
			return fmt.Errorf("%w: data chunk for a non-read", ErrProtocol)
		}
		if _, err := io.ReadFull(cn.nc, scratch[:8]); err != nil {
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
		at := int64(binary.BigEndian.Uint64(scratch[:])) - k.off
		var n int64
		if typ == replyTypeOffsetData {
			n = int64(length) - 8
		} else {
			if length != 12 {
				return fmt.Errorf("%w: bad hole chunk", ErrProtocol)
			}
			if _, err := io.ReadFull(cn.nc, scratch[:4]); err != nil {
				return fmt.Errorf("%w: %v", ErrConnLost, err)
			}
			n = int64(binary.BigEndian.Uint32(scratch[:4]))
		}
		if at < 0 || at+n > int64(len(k.dst)) {
			return fmt.Errorf("%w: chunk outside the read", ErrProtocol)
		}
		if typ == replyTypeOffsetData {
			if _, err := io.ReadFull(cn.nc, k.dst[at:at+n]); err != nil {
				return fmt.Errorf("%w: %v", ErrConnLost, err)
			}
		} else {
			clear(k.dst[at : at+n])
		}
	case replyTypeError, replyTypeErrorOffset:
		if length < 6 || length > 1<<16 {
			return fmt.Errorf("%w: bad error chunk", ErrProtocol)
		}
		b := make([]byte, length)
		if _, err := io.ReadFull(cn.nc, b); err != nil {
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
		ml := int(binary.BigEndian.Uint16(b[4:]))
		msg := ""
		if 6+ml <= len(b) {
			msg = string(b[6 : 6+ml])
		}
		if k.err == nil {
			k.err = remoteErr(k, binary.BigEndian.Uint32(b), msg)
		}
	default:
		if typ&(1<<15) == 0 {
			return fmt.Errorf("%w: unknown chunk type %d", ErrProtocol, typ)
		}
		if _, err := io.CopyN(io.Discard, cn.nc, int64(length)); err != nil {
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
		if k.err == nil {
			k.err = remoteErr(k, uint32(syscall.EIO), fmt.Sprintf("error chunk type %d", typ))
		}
	}
	if flags&replyFlagDone != 0 {
		cn.take(cookie)
		k.done <- struct{}{}
	}
	return nil
}

func remoteErr(k *call, errno uint32, msg string) error {
	var op string
	switch k.op {
	case cmdRead:
		op = "read"
	case cmdWrite:
		op = "write"
	case cmdFlush:
		op = "flush"
	case cmdTrim:
		op = "trim"
	case cmdWriteZeroes:
		op = "write-zeroes"
	}
	e := syscall.Errno(errno)
	if errno == 108 { // NBD_ESHUTDOWN
		e = syscall.ESHUTDOWN
	}
	return &RemoteError{Op: op, Off: k.off, Errno: e, Msg: msg}
}
