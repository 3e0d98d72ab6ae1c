package nbd

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketPair returns both ends of a unix stream socketpair, as kernelnbd
// makes them for the kernel's NBD client.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	return cs[0], cs[1]
}

// kernelRequest sends one request as the kernel client does (no
// handshake, simple replies) and returns the reply's error and data.
func kernelRequest(t *testing.T, c net.Conn, typ uint16, flags uint16, cookie, off uint64, length uint32, data []byte) (uint32, []byte) {
	t.Helper()
	var h [28]byte
	binary.BigEndian.PutUint32(h[0:], magicRequest)
	binary.BigEndian.PutUint16(h[4:], flags)
	binary.BigEndian.PutUint16(h[6:], typ)
	binary.BigEndian.PutUint64(h[8:], cookie)
	binary.BigEndian.PutUint64(h[16:], off)
	binary.BigEndian.PutUint32(h[24:], length)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(append(h[:], data...)); err != nil {
		t.Fatal(err)
	}
	var r [16]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(r[0:]) != magicSimpleReply || binary.BigEndian.Uint64(r[8:]) != cookie {
		t.Fatalf("reply header %x", r)
	}
	errno := binary.BigEndian.Uint32(r[4:])
	var out []byte
	if typ == cmdRead && errno == 0 {
		out = make([]byte, length)
		if _, err := io.ReadFull(c, out); err != nil {
			t.Fatal(err)
		}
	}
	return errno, out
}

// TestServeTransmission serves a connection with no handshake: writes
// (with FUA), reads, flush and trim work at once; the connection is not
// counted against MaxConns and not dropped by the idle sweep; NBD_CMD_DISC
// ends it.
func TestServeTransmission(t *testing.T) {
	be := newMem(t, 8<<20, 4096, 4096, 1<<20)
	s, err := NewServer(Config{Exports: []Export{{Backend: be}}, MaxConns: 1, IdleTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fl, ok := s.TransmissionFlags("")
	want := uint16(tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagCanMultiConn | tflagSendTrim | tflagSendWriteZeroes)
	if !ok || fl != want {
		t.Fatalf("flags %#x, want %#x", fl, want)
	}
	if _, ok := s.TransmissionFlags("nope"); ok {
		t.Fatal("flags of a missing export")
	}
	var ends []chan error
	var clients []net.Conn
	for i := 0; i < 2; i++ { // two, with MaxConns 1
		kernel, ours := socketPair(t)
		done := make(chan error, 1)
		go func() { done <- s.ServeTransmission(ours, "") }()
		ends, clients = append(ends, done), append(clients, kernel)
	}
	if n := s.cfg.Limits.Conns(); n != 0 {
		t.Fatalf("%d connections counted against the limit", n)
	}
	data := bytes.Repeat([]byte("mdtool-k"), 8192/8)
	if e, _ := kernelRequest(t, clients[0], cmdWrite, cmdFlagFUA, 1, 4096, uint32(len(data)), data); e != 0 {
		t.Fatalf("write: errno %d", e)
	}
	// Longer than five idle sweeps: the connection must still serve.
	time.Sleep(200 * time.Millisecond)
	if e, got := kernelRequest(t, clients[1], cmdRead, 0, 2, 4096, uint32(len(data)), nil); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read on the second connection: errno %d, equal %v", e, bytes.Equal(got, data))
	}
	if e, _ := kernelRequest(t, clients[0], cmdFlush, 0, 3, 0, 0, nil); e != 0 {
		t.Fatalf("flush: errno %d", e)
	}
	if e, _ := kernelRequest(t, clients[0], cmdTrim, 0, 4, 4096, 4096, nil); e != 0 {
		t.Fatalf("trim: errno %d", e)
	}
	// A request above the Backend's 1 MiB maximum, as the kernel sends
	// them (up to max_hw_sectors, 32 MiB), is taken.
	big := make([]byte, 4<<20)
	if e, _ := kernelRequest(t, clients[0], cmdWrite, 0, 5, 0, uint32(len(big)), big); e != 0 {
		t.Fatalf("4 MiB write: errno %d", e)
	}
	for i, c := range clients {
		var h [28]byte
		binary.BigEndian.PutUint32(h[0:], magicRequest)
		binary.BigEndian.PutUint16(h[6:], cmdDisc)
		c.Write(h[:])
		select {
		case err := <-ends[i]:
			if err != nil {
				t.Fatalf("connection %d ended with %v", i, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("connection %d did not end after NBD_CMD_DISC", i)
		}
		c.Close()
	}
}
