package nbd

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// rawClient speaks the NBD protocol byte by byte for the tests.
type rawClient struct {
	t          testing.TB
	nc         net.Conn
	br         *bufio.Reader
	structured bool
}

const clientTimeout = 20 * time.Second

func dialRaw(t testing.TB, network, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout(network, addr, clientTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return newRaw(t, nc)
}

func newRaw(t testing.TB, nc net.Conn) *rawClient {
	return &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawClient) deadline() { c.nc.SetDeadline(time.Now().Add(clientTimeout)) }

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	c.deadline()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("client write: %v", err)
	}
}

func (c *rawClient) read(n int) []byte {
	c.t.Helper()
	c.deadline()
	b := make([]byte, n)
	if _, err := io.ReadFull(c.br, b); err != nil {
		c.t.Fatalf("client read %d bytes: %v", n, err)
	}
	return b
}

// hello reads the server greeting and returns the handshake flags.
func (c *rawClient) hello() uint16 {
	c.t.Helper()
	b := c.read(18)
	if binary.BigEndian.Uint64(b) != magicNBD || binary.BigEndian.Uint64(b[8:]) != magicOpt {
		c.t.Fatalf("bad greeting % x", b)
	}
	return binary.BigEndian.Uint16(b[16:])
}

func (c *rawClient) clientFlags(f uint32) {
	c.write(binary.BigEndian.AppendUint32(nil, f))
}

func (c *rawClient) sendOpt(opt uint32, data []byte) {
	b := binary.BigEndian.AppendUint64(nil, magicOpt)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	c.write(append(b, data...))
}

type optReply struct {
	opt, typ uint32
	data     []byte
}

func (c *rawClient) optReply() optReply {
	c.t.Helper()
	b := c.read(20)
	if m := binary.BigEndian.Uint64(b); m != magicOptReply {
		c.t.Fatalf("bad option reply magic %#x", m)
	}
	r := optReply{opt: binary.BigEndian.Uint32(b[8:]), typ: binary.BigEndian.Uint32(b[12:])}
	r.data = c.read(int(binary.BigEndian.Uint32(b[16:])))
	return r
}

// expectOpt sends an option and checks the type of its single reply.
func (c *rawClient) expectOpt(opt uint32, data []byte, typ uint32) optReply {
	c.t.Helper()
	c.sendOpt(opt, data)
	r := c.optReply()
	if r.opt != opt || r.typ != typ {
		c.t.Fatalf("option %d: reply opt %d type %#x (%q), want type %#x", opt, r.opt, r.typ, r.data, typ)
	}
	return r
}

func infoData(name string, infos ...uint16) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(infos)))
	for _, i := range infos {
		b = binary.BigEndian.AppendUint16(b, i)
	}
	return b
}

type exportInfo struct {
	size           uint64
	flags          uint16
	name, desc     string
	min, pref, max uint32
	haveBlock      bool
}

// infoReplies reads NBD_REP_INFO replies up to the final reply and returns
// what they said and the final reply type.
func (c *rawClient) infoReplies(opt uint32) (exportInfo, optReply) {
	c.t.Helper()
	var e exportInfo
	for {
		r := c.optReply()
		if r.opt != opt {
			c.t.Fatalf("reply for option %d, want %d", r.opt, opt)
		}
		if r.typ != repInfo {
			return e, r
		}
		if len(r.data) < 2 {
			c.t.Fatalf("short NBD_REP_INFO % x", r.data)
		}
		switch binary.BigEndian.Uint16(r.data) {
		case infoExport:
			if len(r.data) != 12 {
				c.t.Fatalf("NBD_INFO_EXPORT length %d", len(r.data))
			}
			e.size = binary.BigEndian.Uint64(r.data[2:])
			e.flags = binary.BigEndian.Uint16(r.data[10:])
		case infoName:
			e.name = string(r.data[2:])
		case infoDescription:
			e.desc = string(r.data[2:])
		case infoBlockSize:
			if len(r.data) != 14 {
				c.t.Fatalf("NBD_INFO_BLOCK_SIZE length %d", len(r.data))
			}
			e.haveBlock = true
			e.min = binary.BigEndian.Uint32(r.data[2:])
			e.pref = binary.BigEndian.Uint32(r.data[6:])
			e.max = binary.BigEndian.Uint32(r.data[10:])
		}
	}
}

// start does the greeting with fixed newstyle and no zeroes, optionally
// structured replies, and NBD_OPT_GO with the given information requests.
func (c *rawClient) start(name string, structured bool, infos ...uint16) exportInfo {
	c.t.Helper()
	c.hello()
	c.clientFlags(clientFixedNewstyle | clientNoZeroes)
	return c.goTo(name, structured, infos...)
}

func (c *rawClient) goTo(name string, structured bool, infos ...uint16) exportInfo {
	c.t.Helper()
	if structured {
		c.expectOpt(optStructuredReply, nil, repAck)
		c.structured = true
	}
	c.sendOpt(optGo, infoData(name, infos...))
	e, r := c.infoReplies(optGo)
	if r.typ != repAck {
		c.t.Fatalf("NBD_OPT_GO: final reply %#x %q", r.typ, r.data)
	}
	return e
}

func (c *rawClient) send(flags, typ uint16, cookie, off uint64, length uint32, payload []byte) {
	c.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, magicRequest)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, cookie)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, length)
	c.write(append(b, payload...))
}

type chunk struct {
	flags, typ uint16
	payload    []byte
}

// reply is one complete reply.
type reply struct {
	cookie     uint64
	simple     bool
	errno      uint32 // simple error, or the first error chunk's
	msg        string
	errOffset  int64 // NBD_REPLY_TYPE_ERROR_OFFSET's offset, -1 if none
	data       []byte
	dataOffset uint64 // offset of the first data chunk
	chunks     []chunk
}

// readReply reads the next reply. readLen gives, for a simple reply, the
// data length that follows a successful read (0 for other commands).
func (c *rawClient) readReply(readLen func(cookie uint64) int) reply {
	c.t.Helper()
	r := reply{errOffset: -1}
	for {
		m := binary.BigEndian.Uint32(c.read(4))
		switch m {
		case magicSimpleReply:
			b := c.read(12)
			r.simple = true
			r.errno = binary.BigEndian.Uint32(b)
			r.cookie = binary.BigEndian.Uint64(b[4:])
			if r.errno == 0 {
				if n := readLen(r.cookie); n > 0 {
					r.data = c.read(n)
				}
			}
			return r
		case magicStructReply:
			if !c.structured {
				c.t.Fatal("structured reply without NBD_OPT_STRUCTURED_REPLY")
			}
			b := c.read(16)
			ch := chunk{flags: binary.BigEndian.Uint16(b), typ: binary.BigEndian.Uint16(b[2:])}
			cookie := binary.BigEndian.Uint64(b[4:])
			if len(r.chunks) > 0 && cookie != r.cookie {
				c.t.Fatalf("interleaved chunks of cookies %d and %d (test clients expect none)", r.cookie, cookie)
			}
			r.cookie = cookie
			ch.payload = c.read(int(binary.BigEndian.Uint32(b[12:])))
			r.chunks = append(r.chunks, ch)
			switch {
			case ch.typ == replyTypeOffsetData:
				if len(ch.payload) < 9 {
					c.t.Fatalf("OFFSET_DATA chunk of %d bytes", len(ch.payload))
				}
				if r.data == nil {
					r.dataOffset = binary.BigEndian.Uint64(ch.payload)
				}
				r.data = append(r.data, ch.payload[8:]...)
			case ch.typ&(1<<15) != 0:
				if len(ch.payload) < 6 {
					c.t.Fatalf("error chunk of %d bytes", len(ch.payload))
				}
				ml := int(binary.BigEndian.Uint16(ch.payload[4:]))
				if r.errno == 0 {
					r.errno = binary.BigEndian.Uint32(ch.payload)
					r.msg = string(ch.payload[6 : 6+ml])
				}
				if ch.typ == replyTypeErrorOffset {
					r.errOffset = int64(binary.BigEndian.Uint64(ch.payload[6+ml:]))
				}
			case ch.typ == replyTypeNone:
				if len(ch.payload) != 0 {
					c.t.Fatal("NONE chunk with payload")
				}
			default:
				c.t.Fatalf("unexpected chunk type %d", ch.typ)
			}
			if ch.flags&replyFlagDone != 0 {
				return r
			}
		default:
			c.t.Fatalf("bad reply magic %#x", m)
		}
	}
}

// do sends one request and reads its reply.
func (c *rawClient) do(flags, typ uint16, off uint64, length uint32, payload []byte) reply {
	c.t.Helper()
	const cookie = 0x1122334455667788
	c.send(flags, typ, cookie, off, length, payload)
	r := c.readReply(func(uint64) int {
		if typ == cmdRead {
			return int(length)
		}
		return 0
	})
	if r.cookie != cookie {
		c.t.Fatalf("reply cookie %#x, want %#x", r.cookie, cookie)
	}
	if c.structured && typ == cmdRead && r.simple {
		c.t.Fatal("simple reply to NBD_CMD_READ with structured replies")
	}
	return r
}

// expectClosed checks that the server closes the connection without
// sending anything more.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.deadline()
	b, err := c.br.ReadByte()
	if err == nil {
		c.t.Fatalf("server sent %#x, want the connection closed", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("connection still open")
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i>>9)
	}
	return b
}

func mustEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from the expected %d bytes (first difference at %d)", what, len(got), len(want), i)
	}
}
