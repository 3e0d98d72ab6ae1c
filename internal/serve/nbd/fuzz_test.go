package nbd

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzInput builds client byte streams for the seed corpus.
type fuzzInput []byte

func (b fuzzInput) u16(v uint16) fuzzInput { return binary.BigEndian.AppendUint16(b, v) }
func (b fuzzInput) u32(v uint32) fuzzInput { return binary.BigEndian.AppendUint32(b, v) }
func (b fuzzInput) u64(v uint64) fuzzInput { return binary.BigEndian.AppendUint64(b, v) }

func (b fuzzInput) opt(opt uint32, data []byte) fuzzInput {
	return append(b.u64(magicOpt).u32(opt).u32(uint32(len(data))), data...)
}

func (b fuzzInput) req(flags, typ uint16, off uint64, length uint32, payload []byte) fuzzInput {
	return append(b.u32(magicRequest).u16(flags).u16(typ).u64(0xc0ffee).u64(off).u32(length), payload...)
}

func (b fuzzInput) requests() fuzzInput {
	return b.
		req(0, cmdWrite, 4096, 4096, make([]byte, 4096)).
		req(cmdFlagFUA, cmdWrite, 0, 512, make([]byte, 512)).
		req(0, cmdRead, 0, 8192, nil).
		req(0, cmdRead, 1<<20, 4096, nil).
		req(cmdFlagFUA, cmdTrim, 0, 4096, nil).
		req(cmdFlagNoHole, cmdWriteZeroes, 8192, 4096, nil).
		req(0, cmdFlush, 0, 0, nil).
		req(0, 9, 0, 0, nil).
		req(0, cmdWrite, 1<<20, 16, make([]byte, 16)).
		req(0, cmdDisc, 0, 0, nil)
}

// FuzzServer feeds arbitrary client bytes to a connection: the server must
// neither panic nor hang, whatever arrives during negotiation or
// transmission.
func FuzzServer(f *testing.F) {
	fixed := fuzzInput(nil).u32(clientFixedNewstyle | clientNoZeroes)
	f.Add([]byte{})
	f.Add([]byte(fixed))
	f.Add([]byte(fixed.opt(optStructuredReply, nil).opt(optGo, infoData("", infoBlockSize, infoName)).requests()))
	f.Add([]byte(fixed.opt(optGo, infoData("")).requests()))
	f.Add([]byte(fuzzInput(nil).u32(0).opt(optExportName, nil).requests()))
	f.Add([]byte(fixed.opt(optList, nil).opt(optInfo, infoData("x", infoDescription)).opt(99, []byte("junk")).opt(optStartTLS, nil).opt(optAbort, nil)))
	f.Add([]byte(fixed.opt(optGo, infoData("", infoBlockSize)).req(0, cmdWrite, 0, 1<<20, make([]byte, 100))))
	f.Add([]byte(fixed.opt(optInfo, []byte{0xff, 0xff, 0xff, 0xff, 0, 0})))

	mem := newMem(f, 1<<20, 512, 4096, 1<<20)
	s, err := NewServer(Config{
		Exports:          []Export{{Backend: mem}, {Name: "x", Description: "d", Backend: mem, ReadOnly: true}},
		Workers:          2,
		MaxInFlight:      8,
		HandshakeTimeout: 5 * time.Second,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })

	f.Fuzz(func(t *testing.T, in []byte) {
		cs, ss := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- s.ServeConn(ss) }()
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, cs)
			close(drained)
		}()
		cs.SetWriteDeadline(time.Now().Add(5 * time.Second))
		cs.Write(in) // fails once the server hangs up, which is fine
		cs.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("server still serving 10 s after the client closed (input %q)", in)
		}
		<-drained
	})
}
