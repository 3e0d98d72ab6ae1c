package nbd

import (
	"context"
	"crypto/tls"
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

// conn is one client connection.
type conn struct {
	s  *Server
	nc net.Conn // the socket
	rw net.Conn // nc, or the TLS connection over it

	mu           sync.Mutex
	closing      bool
	transmitting bool

	// negotiation state
	fixed      bool // client set NBD_FLAG_C_FIXED_NEWSTYLE
	noZeroes   bool
	tlsActive  bool
	structured bool
	negotiated bool // the client asked for NBD_INFO_BLOCK_SIZE in NBD_OPT_GO
	// preNegotiated: served by ServeTransmission (no handshake, never idle)
	preNegotiated bool
	optBuf        []byte

	// Activity, for the idle sweep. rseq grows by 2 per request read and
	// is odd while a WRITE payload is being read; wseq grows by 2 per
	// reply write and is odd during the write. tx is set (under mu) once
	// transmitting; lastR, lastW and idle belong to the sweeper.
	rseq, wseq   atomic.Uint64
	dropped      atomic.Bool // the socket was closed: stop reading requests
	tx           *transmission
	lastR, lastW uint64
	idle         int
}

func newConn(s *Server, nc net.Conn) *conn { return &conn{s: s, nc: nc, rw: nc} }

// errClosed marks the end of a connection that needs no logging.
var errClosed = errors.New("nbd: connection closed")

// shutdown is called by Server.Close with s.mu held: a negotiating
// connection is closed at once; a transmitting one stops reading requests
// and ends once the requests already read are answered.
func (c *conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	if c.transmitting {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		c.nc.SetWriteDeadline(time.Now().Add(shutdownWriteGrace))
	} else {
		c.nc.Close()
	}
}

// sweep is called by the idle sweeper with s.mu held; it closes the
// connection after idleTicks+1 sweeps without progress while nothing of
// the client is in the Backend (or waiting for budget), or while one
// reply write or WRITE payload read stays blocked.
func (c *conn) sweep() {
	c.mu.Lock()
	t, closing := c.tx, c.closing
	c.mu.Unlock()
	if t == nil || closing || c.preNegotiated {
		return
	}
	r, w := c.rseq.Load(), c.wseq.Load()
	if r != c.lastR || w != c.lastW {
		c.lastR, c.lastW, c.idle = r, w, 0
		return
	}
	clientOwes := r&1 != 0 || w&1 != 0
	if !clientOwes && len(t.free) < cap(t.free) {
		c.idle = 0 // requests are in the Backend or wait for budget
		return
	}
	if c.idle++; c.idle <= idleTicks {
		return
	}
	c.idle = 0
	what := "no request and no reply"
	switch {
	case w&1 != 0:
		what = "a reply write blocked"
	case r&1 != 0:
		what = "a write payload stalled"
	}
	c.s.log.Warn("nbd: idle connection dropped", "remote", remoteName(c.nc), "timeout", c.s.cfg.IdleTimeout, "reason", what)
	c.dropped.Store(true)
	c.nc.Close()
}

// serve runs the connection to its end and closes it.
func (c *conn) serve() error {
	defer c.nc.Close()
	log := c.s.log.With("remote", remoteName(c.nc))
	x, err := c.negotiate()
	if err != nil {
		if !errors.Is(err, errClosed) && !isEOF(err) {
			log.Info("nbd: negotiation failed", "err", err)
		}
		return err
	}
	if x == nil { // NBD_OPT_ABORT
		c.closeTLS()
		return nil
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return ErrServerClosed
	}
	c.nc.SetDeadline(time.Time{})
	c.transmitting = true
	c.mu.Unlock()
	log.Debug("nbd: transmission", "export", x.Name, "structured", c.structured, "tls", c.tlsActive)
	err = c.transmit(x, log)
	c.closeTLS()
	return err
}

func (c *conn) closeTLS() {
	if t, ok := c.rw.(*tls.Conn); ok {
		t.SetWriteDeadline(time.Now().Add(time.Second))
		t.CloseWrite()
	}
}

func remoteName(nc net.Conn) string {
	if a := nc.RemoteAddr(); a != nil && a.String() != "" {
		return a.String()
	}
	return nc.LocalAddr().Network()
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTemporaryAcceptError(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// negotiate runs the fixed newstyle handshake. It returns the export to
// serve, nil after NBD_OPT_ABORT, or an error when the session ends.
func (c *conn) negotiate() (*exp, error) {
	s := c.s
	c.nc.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	var hello [18]byte
	binary.BigEndian.PutUint64(hello[0:], magicNBD)
	binary.BigEndian.PutUint64(hello[8:], magicOpt)
	binary.BigEndian.PutUint16(hello[16:], flagFixedNewstyle|flagNoZeroes)
	if _, err := c.rw.Write(hello[:]); err != nil {
		return nil, err
	}
	var cf [4]byte
	if _, err := io.ReadFull(c.rw, cf[:]); err != nil {
		return nil, err
	}
	flags := binary.BigEndian.Uint32(cf[:])
	if flags&^(clientFixedNewstyle|clientNoZeroes) != 0 {
		return nil, fmt.Errorf("nbd: unknown client flags %#x", flags)
	}
	c.fixed = flags&clientFixedNewstyle != 0
	c.noZeroes = flags&clientNoZeroes != 0
	if s.cfg.TLS != nil && !s.cfg.TLSOptional && !c.fixed {
		return nil, errors.New("nbd: TLS required but the client does not speak fixed newstyle")
	}
	for {
		var h [optHeaderSize]byte
		if _, err := io.ReadFull(c.rw, h[:]); err != nil {
			return nil, err
		}
		if binary.BigEndian.Uint64(h[0:]) != magicOpt {
			return nil, errors.New("nbd: bad option magic")
		}
		opt := binary.BigEndian.Uint32(h[8:])
		n := binary.BigEndian.Uint32(h[12:])
		if n > maxOptionLen {
			return nil, fmt.Errorf("nbd: option %d with %d bytes of data", opt, n)
		}
		if cap(c.optBuf) < int(n) {
			c.optBuf = make([]byte, n)
		}
		data := c.optBuf[:n]
		if _, err := io.ReadFull(c.rw, data); err != nil {
			return nil, err
		}
		x, done, err := c.option(opt, data)
		if err != nil || done {
			return x, err
		}
	}
}

// option handles one option; done reports the end of negotiation.
func (c *conn) option(opt uint32, data []byte) (x *exp, done bool, err error) {
	s := c.s
	tlsRequired := s.cfg.TLS != nil && !s.cfg.TLSOptional && !c.tlsActive
	if c.s.isClosed() && opt != optAbort {
		return nil, false, c.reply(opt, repErrShutdown, "server shutting down")
	}
	if tlsRequired && opt != optStartTLS && opt != optAbort {
		if opt == optExportName {
			return nil, true, errors.New("nbd: NBD_OPT_EXPORT_NAME without the required TLS")
		}
		return nil, false, c.reply(opt, repErrTLSReqd, "TLS is required: send NBD_OPT_STARTTLS")
	}
	switch opt {
	case optExportName:
		if len(data) > maxStringLen {
			return nil, true, errors.New("nbd: export name too long")
		}
		x := s.lookup(string(data))
		if x == nil {
			return nil, true, fmt.Errorf("nbd: NBD_OPT_EXPORT_NAME: no export %q", data)
		}
		b := make([]byte, 10, 134)
		binary.BigEndian.PutUint64(b[0:], uint64(x.Backend.Size()))
		binary.BigEndian.PutUint16(b[8:], c.transmissionFlags(x))
		if !c.noZeroes {
			b = b[:134]
		}
		if _, err := c.rw.Write(b); err != nil {
			return nil, true, err
		}
		c.negotiated = false
		return x, true, nil
	case optAbort:
		// The client may already be gone; a failed reply is still an abort.
		c.reply(opt, repAck, "")
		return nil, true, nil
	case optList:
		if len(data) != 0 {
			return nil, false, c.reply(opt, repErrInvalid, "NBD_OPT_LIST takes no data")
		}
		for _, x := range s.exports {
			b := make([]byte, 4, 4+len(x.Name)+len(x.Description))
			binary.BigEndian.PutUint32(b, uint32(len(x.Name)))
			b = append(b, x.Name...)
			b = append(b, x.Description...)
			if err := c.replyData(opt, repServer, b); err != nil {
				return nil, false, err
			}
		}
		return nil, false, c.reply(opt, repAck, "")
	case optStartTLS:
		switch {
		case s.cfg.TLS == nil || !c.fixed:
			return nil, false, c.reply(opt, repErrPolicy, "TLS is not configured")
		case len(data) != 0:
			return nil, false, c.reply(opt, repErrInvalid, "NBD_OPT_STARTTLS takes no data")
		case c.tlsActive:
			return nil, false, c.reply(opt, repErrInvalid, "TLS is already active")
		}
		if err := c.reply(opt, repAck, ""); err != nil {
			return nil, true, err
		}
		t := tls.Server(c.nc, s.cfg.TLS)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HandshakeTimeout)
		err := t.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.log.Warn("nbd: TLS handshake failed", "remote", remoteName(c.nc), "err", err)
			return nil, true, errClosed
		}
		c.rw = t
		c.tlsActive = true
		c.structured = false // the spec forbids keeping state across STARTTLS
		return nil, false, nil
	case optInfo, optGo:
		return c.infoGo(opt, data)
	case optStructuredReply:
		if len(data) != 0 {
			return nil, false, c.reply(opt, repErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")
		}
		c.structured = true
		return nil, false, c.reply(opt, repAck, "")
	default:
		return nil, false, c.reply(opt, repErrUnsup, "option not supported")
	}
}

// infoGo answers NBD_OPT_INFO and NBD_OPT_GO.
func (c *conn) infoGo(opt uint32, data []byte) (*exp, bool, error) {
	if len(data) < 6 {
		return nil, false, c.reply(opt, repErrInvalid, "option data too short")
	}
	nameLen := binary.BigEndian.Uint32(data)
	if uint64(nameLen) > uint64(len(data)-6) {
		return nil, false, c.reply(opt, repErrInvalid, "name length exceeds option data")
	}
	name := data[4 : 4+nameLen]
	rest := data[4+nameLen:]
	nreq := int(binary.BigEndian.Uint16(rest))
	if len(rest) != 2+2*nreq {
		return nil, false, c.reply(opt, repErrInvalid, "information request count does not match option length")
	}
	if len(name) > maxStringLen {
		return nil, false, c.reply(opt, repErrInvalid, "export name longer than 4096 bytes")
	}
	x := c.s.lookup(string(name))
	if x == nil {
		return nil, false, c.reply(opt, repErrUnknown, "no such export")
	}
	var wantName, wantDesc, wantBlock bool
	for i := 0; i < nreq; i++ {
		switch binary.BigEndian.Uint16(rest[2+2*i:]) {
		case infoName:
			wantName = true
		case infoDescription:
			wantDesc = true
		case infoBlockSize:
			wantBlock = true
		}
	}
	var b [14]byte
	binary.BigEndian.PutUint16(b[0:], infoExport)
	binary.BigEndian.PutUint64(b[2:], uint64(x.Backend.Size()))
	binary.BigEndian.PutUint16(b[10:], c.transmissionFlags(x))
	if err := c.replyData(opt, repInfo, b[:12]); err != nil {
		return nil, true, err
	}
	if wantName {
		if err := c.replyData(opt, repInfo, append([]byte{0, infoName}, x.Name...)); err != nil {
			return nil, true, err
		}
	}
	if wantDesc && x.Description != "" {
		if err := c.replyData(opt, repInfo, append([]byte{0, infoDescription}, x.Description...)); err != nil {
			return nil, true, err
		}
	}
	// Block sizes are sent whether asked for or not: the spec allows
	// unrequested information, and clients must ignore what they do not
	// understand.
	binary.BigEndian.PutUint16(b[0:], infoBlockSize)
	binary.BigEndian.PutUint32(b[2:], x.min)
	binary.BigEndian.PutUint32(b[6:], x.pref)
	binary.BigEndian.PutUint32(b[10:], x.max)
	if err := c.replyData(opt, repInfo, b[:14]); err != nil {
		return nil, true, err
	}
	if err := c.reply(opt, repAck, ""); err != nil {
		return nil, true, err
	}
	if opt == optInfo {
		return nil, false, nil
	}
	c.negotiated = wantBlock
	return x, true, nil
}

// transmissionFlags returns the export's flags for this connection.
func (c *conn) transmissionFlags(x *exp) uint16 { return x.tflags }

// reply sends an option reply whose data is msg (an error message or
// nothing).
func (c *conn) reply(opt, typ uint32, msg string) error {
	return c.replyData(opt, typ, []byte(msg))
}

func (c *conn) replyData(opt, typ uint32, data []byte) error {
	b := make([]byte, 20, 20+len(data))
	binary.BigEndian.PutUint64(b[0:], magicOptReply)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], typ)
	binary.BigEndian.PutUint32(b[16:], uint32(len(data)))
	_, err := c.rw.Write(append(b, data...))
	return err
}
