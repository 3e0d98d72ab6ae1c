// Package crashload is a test workload for crash tests of block devices
// served over NBD: random block writes that carry their block number and a
// sequence number, periodic flushes, and a record of which version of
// every block was acknowledged before a completed flush. After a crash
// (the server killed at a random moment) Verify reads every block back and
// checks that none is older than what a completed flush covered, and that
// none is torn or made up.
//
// It has its own small NBD client (fixed newstyle handshake,
// NBD_OPT_EXPORT_NAME, simple replies, pipelined requests), so that the
// test knows exactly which requests were acknowledged.
package crashload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// NBD protocol numbers (NetworkBlockDevice/nbd doc/proto.md).
const (
	nbdMagic         = 0x4e42444d41474943 // "NBDMAGIC"
	optMagic         = 0x49484156454F5054 // "IHAVEOPT"
	requestMagic     = 0x25609513
	simpleReplyMagic = 0x67446698

	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1
	optExportName     = 1

	tflagReadOnly  = 1 << 1
	tflagSendFlush = 1 << 2

	cmdRead  = 0
	cmdWrite = 1
	cmdDisc  = 2
	cmdFlush = 3
)

// ErrClosed is returned for requests after the connection ended.
var ErrClosed = errors.New("crashload: connection closed")

// ReplyError is an error the server returned for a request.
type ReplyError struct {
	Cmd   string
	Errno uint32
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("crashload: NBD %s: server error %d", e.Cmd, e.Errno)
}

// Client is a minimal pipelined NBD client: any number of goroutines may
// issue requests at once.
type Client struct {
	conn  net.Conn
	size  int64
	flags uint16

	wmu sync.Mutex // serialises requests on the wire

	mu      sync.Mutex
	pending map[uint64]*call
	handle  uint64
	err     error // set once the connection failed
	done    chan struct{}
}

type call struct {
	buf  []byte // read destination
	cmd  string
	done chan error
}

// Dial connects to the NBD server on a unix socket and opens its default
// export.
func Dial(socket string) (*Client, error) {
	conn, err := net.DialTimeout("unix", socket, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := handshake(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func handshake(conn net.Conn) (*Client, error) {
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var hdr [18]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return nil, fmt.Errorf("crashload: handshake: %w", err)
	}
	if binary.BigEndian.Uint64(hdr[0:]) != nbdMagic || binary.BigEndian.Uint64(hdr[8:]) != optMagic {
		return nil, errors.New("crashload: not a newstyle NBD server")
	}
	sflags := binary.BigEndian.Uint16(hdr[16:])
	if sflags&flagFixedNewstyle == 0 {
		return nil, errors.New("crashload: server lacks fixed newstyle")
	}
	cflags := uint32(flagFixedNewstyle)
	if sflags&flagNoZeroes != 0 {
		cflags |= flagNoZeroes
	}
	var req [20]byte
	binary.BigEndian.PutUint32(req[0:], cflags)
	binary.BigEndian.PutUint64(req[4:], optMagic)
	binary.BigEndian.PutUint32(req[12:], optExportName)
	binary.BigEndian.PutUint32(req[16:], 0) // export name ""
	if _, err := conn.Write(req[:]); err != nil {
		return nil, fmt.Errorf("crashload: handshake: %w", err)
	}
	n := 10
	if cflags&flagNoZeroes == 0 {
		n += 124
	}
	rep := make([]byte, n)
	if _, err := io.ReadFull(conn, rep); err != nil {
		return nil, fmt.Errorf("crashload: export: %w", err)
	}
	conn.SetDeadline(time.Time{})
	c := &Client{conn: conn, size: int64(binary.BigEndian.Uint64(rep[0:])), flags: binary.BigEndian.Uint16(rep[8:]),
		pending: map[uint64]*call{}, done: make(chan struct{})}
	if c.flags&tflagReadOnly != 0 {
		return nil, errors.New("crashload: the export is read-only")
	}
	if c.flags&tflagSendFlush == 0 {
		return nil, errors.New("crashload: the export does not take flushes")
	}
	go c.reader()
	return c, nil
}

// Size is the export size in bytes.
func (c *Client) Size() int64 { return c.size }

func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		for h, cl := range c.pending {
			cl.done <- err
			delete(c.pending, h)
		}
	}
	c.mu.Unlock()
}

func (c *Client) reader() {
	defer close(c.done)
	var hdr [16]byte
	for {
		if _, err := io.ReadFull(c.conn, hdr[:]); err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
			return
		}
		if binary.BigEndian.Uint32(hdr[0:]) != simpleReplyMagic {
			c.fail(errors.New("crashload: bad reply magic"))
			c.conn.Close()
			return
		}
		errno := binary.BigEndian.Uint32(hdr[4:])
		h := binary.BigEndian.Uint64(hdr[8:])
		c.mu.Lock()
		cl := c.pending[h]
		delete(c.pending, h)
		c.mu.Unlock()
		if cl == nil {
			c.fail(fmt.Errorf("crashload: reply for unknown handle %d", h))
			c.conn.Close()
			return
		}
		if errno != 0 {
			cl.done <- &ReplyError{Cmd: cl.cmd, Errno: errno}
			continue
		}
		if cl.buf != nil {
			if _, err := io.ReadFull(c.conn, cl.buf); err != nil {
				cl.done <- fmt.Errorf("%w: %v", ErrClosed, err)
				c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
				return
			}
		}
		cl.done <- nil
	}
}

func (c *Client) do(cmd uint16, name string, off int64, n int, wdata, rbuf []byte) error {
	cl := &call{buf: rbuf, cmd: name, done: make(chan error, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.handle++
	h := c.handle
	c.pending[h] = cl
	c.mu.Unlock()
	var req [28]byte
	binary.BigEndian.PutUint32(req[0:], requestMagic)
	binary.BigEndian.PutUint16(req[6:], cmd)
	binary.BigEndian.PutUint64(req[8:], h)
	binary.BigEndian.PutUint64(req[16:], uint64(off))
	binary.BigEndian.PutUint32(req[24:], uint32(n))
	c.wmu.Lock()
	_, err := c.conn.Write(req[:])
	if err == nil && wdata != nil {
		_, err = c.conn.Write(wdata)
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("%w: %v", ErrClosed, err))
	}
	return <-cl.done
}

// ReadAt reads len(p) bytes at off.
func (c *Client) ReadAt(p []byte, off int64) error {
	return c.do(cmdRead, "read", off, len(p), nil, p)
}

// WriteAt writes p at off; it returns once the server acknowledged it.
func (c *Client) WriteAt(p []byte, off int64) error {
	return c.do(cmdWrite, "write", off, len(p), p, nil)
}

// Flush asks the server to make every acknowledged write durable.
func (c *Client) Flush() error {
	return c.do(cmdFlush, "flush", 0, 0, nil, nil)
}

// Close disconnects (NBD_CMD_DISC) and closes the connection.
func (c *Client) Close() error {
	var req [28]byte
	binary.BigEndian.PutUint32(req[0:], requestMagic)
	binary.BigEndian.PutUint16(req[6:], cmdDisc)
	c.wmu.Lock()
	c.conn.Write(req[:])
	c.wmu.Unlock()
	err := c.conn.Close()
	<-c.done
	return err
}
