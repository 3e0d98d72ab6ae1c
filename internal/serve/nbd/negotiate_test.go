package nbd

import (
	"bytes"
	"encoding/binary"
	"testing"

	"mdtool/internal/serve/export"
)

func negotiationServer(t *testing.T) (*Server, string, *export.Mem) {
	t.Helper()
	m := newMem(t, 1<<20, 512, 4096, 1<<20)
	ro := newMem(t, 2<<20, 4096, 65536, 4<<20)
	s, sock := startUnix(t, Config{Exports: []Export{
		{Name: "a", Description: "first export", Backend: m},
		{Name: "ro", Backend: ro, ReadOnly: true},
	}})
	return s, sock, m
}

const rwFlags = tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagCanMultiConn

func TestNegotiation(t *testing.T) {
	_, sock, _ := negotiationServer(t)
	fixed := uint32(clientFixedNewstyle | clientNoZeroes)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c *rawClient)
	}{
		{"greeting", func(t *testing.T, c *rawClient) {
			if f := c.hello(); f != flagFixedNewstyle|flagNoZeroes {
				t.Fatalf("handshake flags %#x", f)
			}
		}},
		{"unknown client flags", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(clientFixedNewstyle | 1<<2)
			c.expectClosed()
		}},
		{"bad option magic", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.write(bytes.Repeat([]byte{0xaa}, 16))
			c.expectClosed()
		}},
		{"huge option length", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			b := binary.BigEndian.AppendUint64(nil, magicOpt)
			b = binary.BigEndian.AppendUint32(b, optGo)
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
			c.write(b)
			c.expectClosed()
		}},
		{"unknown options", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.expectOpt(99, []byte("0123456789"), repErrUnsup)
			c.expectOpt(optListMetaContext, infoData("a"), repErrUnsup)
			c.expectOpt(optSetMetaContext, infoData("a"), repErrUnsup)
			c.expectOpt(optExtendedHeaders, nil, repErrUnsup)
			c.expectOpt(optPeekExport, nil, repErrUnsup)
			// The parser is still in step.
			c.expectOpt(optStructuredReply, nil, repAck)
		}},
		{"list", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.sendOpt(optList, nil)
			var names []string
			for {
				r := c.optReply()
				if r.typ == repAck {
					break
				}
				if r.typ != repServer {
					t.Fatalf("reply type %#x", r.typ)
				}
				n := binary.BigEndian.Uint32(r.data)
				names = append(names, string(r.data[4:4+n])+"|"+string(r.data[4+n:]))
			}
			if len(names) != 2 || names[0] != "a|first export" || names[1] != "ro|" {
				t.Fatalf("exports %q", names)
			}
			c.expectOpt(optList, []byte{1}, repErrInvalid)
		}},
		{"options with forbidden data", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.expectOpt(optStructuredReply, []byte{0}, repErrInvalid)
			r := c.expectOpt(optStartTLS, nil, repErrPolicy)
			if len(r.data) == 0 {
				t.Fatal("error reply without message")
			}
		}},
		{"info errors", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.expectOpt(optInfo, infoData("nope"), repErrUnknown)
			c.expectOpt(optInfo, []byte{0, 0, 0, 0, 0}, repErrInvalid)
			bad := infoData("a", infoBlockSize)
			binary.BigEndian.PutUint32(bad, 200)
			c.expectOpt(optInfo, bad, repErrInvalid)
			bad = infoData("a", infoBlockSize)
			c.expectOpt(optInfo, bad[:len(bad)-1], repErrInvalid)
			c.expectOpt(optGo, append(infoData("a"), 0), repErrInvalid)
			c.expectOpt(optGo, infoData("nope"), repErrUnknown)
		}},
		{"info then go", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.sendOpt(optInfo, infoData("a", infoName, infoDescription, infoBlockSize, 77))
			e, r := c.infoReplies(optInfo)
			if r.typ != repAck {
				t.Fatalf("final reply %#x", r.typ)
			}
			want := exportInfo{size: 1 << 20, flags: rwFlags, name: "a", desc: "first export", min: 512, pref: 4096, max: 1 << 20, haveBlock: true}
			if e != want {
				t.Fatalf("info %+v, want %+v", e, want)
			}
			// NBD_OPT_INFO stays in negotiation.
			c.expectOpt(optStructuredReply, nil, repAck)
			c.structured = true
			e = c.goTo("", false, infoName)
			if e.name != "a" || e.size != 1<<20 || !e.haveBlock {
				t.Fatalf("default export info %+v", e)
			}
			if r := c.do(0, cmdRead, 0, 4096, nil); r.errno != 0 || len(r.data) != 4096 {
				t.Fatalf("read: errno %d, %d bytes", r.errno, len(r.data))
			}
		}},
		{"read-only flags", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			e := c.goTo("ro", false, infoBlockSize)
			if want := uint16(tflagHasFlags | tflagReadOnly | tflagSendFlush | tflagSendFUA | tflagCanMultiConn); e.flags != want {
				t.Fatalf("flags %#x, want %#x", e.flags, want)
			}
			if e.min != 4096 || e.pref != 65536 || e.max != 4<<20 {
				t.Fatalf("block sizes %d %d %d", e.min, e.pref, e.max)
			}
		}},
		{"abort", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.expectOpt(optAbort, nil, repAck)
			c.expectClosed()
		}},
		{"export name unknown", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.sendOpt(optExportName, []byte("nope"))
			c.expectClosed()
		}},
		{"export name with zeroes, not fixed", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(0)
			c.sendOpt(optExportName, []byte("a"))
			b := c.read(134)
			if binary.BigEndian.Uint64(b) != 1<<20 || binary.BigEndian.Uint16(b[8:]) != rwFlags {
				t.Fatalf("export reply % x", b[:10])
			}
			if !bytes.Equal(b[10:], make([]byte, 124)) {
				t.Fatal("reserved bytes not zero")
			}
			if r := c.do(0, cmdRead, 512, 512, nil); r.errno != 0 || len(r.data) != 512 {
				t.Fatalf("read: errno %d", r.errno)
			}
		}},
		{"export name without zeroes", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			c.sendOpt(optExportName, nil) // default export
			b := c.read(10)
			if binary.BigEndian.Uint64(b) != 1<<20 {
				t.Fatalf("size %d", binary.BigEndian.Uint64(b))
			}
			// The next bytes are a reply to this request, not zeroes.
			if r := c.do(0, cmdFlush, 0, 0, nil); r.errno != 0 {
				t.Fatalf("flush: errno %d", r.errno)
			}
		}},
		{"eof in option data", func(t *testing.T, c *rawClient) {
			c.hello()
			c.clientFlags(fixed)
			b := binary.BigEndian.AppendUint64(nil, magicOpt)
			b = binary.BigEndian.AppendUint32(b, optGo)
			b = binary.BigEndian.AppendUint32(b, 100)
			c.write(append(b, 1, 2, 3))
			c.nc.(interface{ CloseWrite() error }).CloseWrite()
			c.expectClosed()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, dialRaw(t, "unix", sock))
			// The server survives: a new client gets through.
			c := dialRaw(t, "unix", sock)
			c.start("a", true, infoBlockSize)
			if r := c.do(0, cmdRead, 0, 512, nil); r.errno != 0 {
				t.Fatalf("read after %s: errno %d", tc.name, r.errno)
			}
		})
	}
}
