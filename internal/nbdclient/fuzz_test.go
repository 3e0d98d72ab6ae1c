package nbdclient

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// streamConn is a net.Conn whose reads come from a fixed byte stream and
// whose writes are discarded.
type streamConn struct{ r io.Reader }

func (s *streamConn) Read(p []byte) (int, error)       { return s.r.Read(p) }
func (s *streamConn) Write(p []byte) (int, error)      { return len(p), nil }
func (s *streamConn) Close() error                     { return nil }
func (s *streamConn) LocalAddr() net.Addr              { return nil }
func (s *streamConn) RemoteAddr() net.Addr             { return nil }
func (s *streamConn) SetDeadline(time.Time) error      { return nil }
func (s *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (s *streamConn) SetWriteDeadline(time.Time) error { return nil }

// greeting builds a valid server handshake up to NBD_OPT_GO's reply.
func greeting(size uint64, tflags uint16, structured bool) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.BigEndian, v) }
	w(uint64(magicNBD))
	w(uint64(magicOpt))
	w(uint16(hflagFixedNewstyle | hflagNoZeroes))
	reply := func(opt, typ uint32, data []byte) {
		w(uint64(magicOptReply))
		w(opt)
		w(typ)
		w(uint32(len(data)))
		b.Write(data)
	}
	if structured {
		reply(optStructuredReply, repAck, nil)
	} else {
		reply(optStructuredReply, repErrUnsup, nil)
	}
	info := make([]byte, 12)
	binary.BigEndian.PutUint16(info, infoExport)
	binary.BigEndian.PutUint64(info[2:], size)
	binary.BigEndian.PutUint16(info[10:], tflags)
	reply(optGo, repInfo, info)
	bs := make([]byte, 14)
	binary.BigEndian.PutUint16(bs, infoBlockSize)
	binary.BigEndian.PutUint32(bs[2:], 512)
	binary.BigEndian.PutUint32(bs[6:], 4096)
	binary.BigEndian.PutUint32(bs[10:], 1<<20)
	reply(optGo, repInfo, bs)
	reply(optGo, repAck, nil)
	return b.Bytes()
}

func TestNegotiateGreeting(t *testing.T) {
	u, _ := ParseURI("nbd+unix:///x?socket=/s")
	_, ex, err := negotiate(&streamConn{bytes.NewReader(greeting(1<<30, tflagHasFlags|tflagSendFlush, true))}, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ex.size != 1<<30 || !ex.structured || ex.minBlock != 512 || ex.prefBlock != 4096 || ex.maxBlock != 1<<20 ||
		ex.tflags != tflagHasFlags|tflagSendFlush {
		t.Fatalf("got %+v", *ex)
	}
}

// FuzzNegotiate: any server byte stream ends the handshake with a result
// or an error, never a panic or a hang.
func FuzzNegotiate(f *testing.F) {
	f.Add(greeting(1<<20, 1, true))
	f.Add(greeting(0, 0, false))
	f.Add([]byte("NBDMAGIC"))
	u, _ := ParseURI("nbd+unix:///x?socket=/s")
	f.Fuzz(func(t *testing.T, b []byte) {
		negotiate(&streamConn{bytes.NewReader(b)}, u, nil)
	})
}

// FuzzReplies: any reply stream completes or fails the pending requests,
// never panics, never writes outside a request's buffer.
func FuzzReplies(f *testing.F) {
	simple := func(errno uint32, cookie uint64, data []byte) []byte {
		b := make([]byte, 16, 16+len(data))
		binary.BigEndian.PutUint32(b, magicSimpleReply)
		binary.BigEndian.PutUint32(b[4:], errno)
		binary.BigEndian.PutUint64(b[8:], cookie)
		return append(b, data...)
	}
	chunk := func(flags, typ uint16, cookie uint64, payload []byte) []byte {
		b := make([]byte, 20, 20+len(payload))
		binary.BigEndian.PutUint32(b, magicStructReply)
		binary.BigEndian.PutUint16(b[4:], flags)
		binary.BigEndian.PutUint16(b[6:], typ)
		binary.BigEndian.PutUint64(b[8:], cookie)
		binary.BigEndian.PutUint32(b[16:], uint32(len(payload)))
		return append(b, payload...)
	}
	data := make([]byte, 8+16)
	binary.BigEndian.PutUint64(data, 4096)
	f.Add(append(simple(0, 1, make([]byte, 32)), simple(5, 2, nil)...))
	f.Add(append(chunk(0, replyTypeOffsetData, 1, data), chunk(replyFlagDone, replyTypeNone, 1, nil)...))
	f.Add(chunk(replyFlagDone, replyTypeErrorOffset, 2, []byte{0, 0, 0, 5, 0, 2, 'h', 'i', 0, 0, 0, 0, 0, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Client{uri: &URI{Raw: "fuzz"}, stop: make(chan struct{})}
		cn := newConn(c, &streamConn{bytes.NewReader(b)}, true)
		c.conns = []*conn{cn}
		bufs := [][]byte{make([]byte, 32), nil}
		cn.pending[1] = &call{op: cmdRead, off: 4096, dst: bufs[0], done: make(chan struct{}, 1)}
		cn.pending[2] = &call{op: cmdWrite, off: 0, done: make(chan struct{}, 1)}
		c.wg.Add(1)
		cn.readLoop()
		if len(cn.pending) != 0 {
			t.Fatalf("%d requests left pending after the stream ended", len(cn.pending))
		}
	})
}
