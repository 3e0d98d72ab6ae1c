package nbdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

// export is what the handshake learned.
type export struct {
	size       uint64
	tflags     uint16
	structured bool
	minBlock   uint32
	prefBlock  uint32
	maxBlock   uint32
}

// ErrHandshake wraps every handshake failure.
var ErrHandshake = errors.New("nbd handshake failed")

func handshakeErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrHandshake, fmt.Sprintf(format, a...))
}

// dialOne connects and negotiates one connection.
func dialOne(ctx context.Context, u *URI, tlsConf *tls.Config) (net.Conn, *export, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, u.Network, u.Addr)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	c, ex, err := negotiate(nc, u, tlsConf)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	c.SetDeadline(timeZero)
	return c, ex, nil
}

// negotiate runs the fixed-newstyle handshake on nc.
func negotiate(nc net.Conn, u *URI, tlsConf *tls.Config) (net.Conn, *export, error) {
	var hdr [18]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, nil, handshakeErr("reading the greeting: %v", err)
	}
	if binary.BigEndian.Uint64(hdr[0:]) != magicNBD {
		return nil, nil, handshakeErr("not an NBD server")
	}
	if binary.BigEndian.Uint64(hdr[8:]) != magicOpt {
		return nil, nil, handshakeErr("oldstyle servers are not supported")
	}
	hflags := binary.BigEndian.Uint16(hdr[16:])
	if hflags&hflagFixedNewstyle == 0 {
		return nil, nil, handshakeErr("the server does not speak fixed newstyle")
	}
	cflags := uint32(hflagFixedNewstyle)
	noZeroes := hflags&hflagNoZeroes != 0
	if noZeroes {
		cflags |= hflagNoZeroes
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], cflags)
	if _, err := nc.Write(b[:]); err != nil {
		return nil, nil, handshakeErr("%v", err)
	}
	c := nc
	o := &optConn{c: c}
	if u.TLS {
		typ, _, err := o.option(optStartTLS, nil)
		if err != nil {
			return nil, nil, err
		}
		if typ != repAck {
			return nil, nil, handshakeErr("the server refused TLS (%s)", repName(typ))
		}
		tc := tls.Client(nc, tlsConf)
		if err := tc.Handshake(); err != nil {
			return nil, nil, handshakeErr("TLS: %v", err)
		}
		c = tc
		o.c = c
	}
	ex := &export{}
	typ, _, err := o.option(optStructuredReply, nil)
	if err != nil {
		return nil, nil, err
	}
	ex.structured = typ == repAck
	if err := o.goExport(u.Export, ex); err != nil {
		if !errors.Is(err, errUnsupGo) {
			return nil, nil, err
		}
		if err := o.exportName(u.Export, ex, noZeroes); err != nil {
			return nil, nil, err
		}
	}
	if ex.minBlock == 0 {
		ex.minBlock = 1
	}
	if ex.prefBlock == 0 {
		ex.prefBlock = 4096
	}
	if ex.maxBlock == 0 || ex.maxBlock > defaultMaxBlock {
		ex.maxBlock = defaultMaxBlock
	}
	return c, ex, nil
}

var errUnsupGo = errors.New("NBD_OPT_GO unsupported")

type optConn struct {
	c   net.Conn
	buf []byte
}

// send writes one option request.
func (o *optConn) send(opt uint32, data []byte) error {
	b := make([]byte, 16+len(data))
	binary.BigEndian.PutUint64(b[0:], magicOpt)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], uint32(len(data)))
	copy(b[16:], data)
	if _, err := o.c.Write(b); err != nil {
		return handshakeErr("%v", err)
	}
	return nil
}

// reply reads one option reply for opt.
func (o *optConn) reply(opt uint32) (typ uint32, data []byte, err error) {
	var h [20]byte
	if _, err := io.ReadFull(o.c, h[:]); err != nil {
		return 0, nil, handshakeErr("reading an option reply: %v", err)
	}
	if binary.BigEndian.Uint64(h[0:]) != magicOptReply {
		return 0, nil, handshakeErr("bad option reply magic")
	}
	if got := binary.BigEndian.Uint32(h[8:]); got != opt {
		return 0, nil, handshakeErr("reply to option %d while waiting for %d", got, opt)
	}
	typ = binary.BigEndian.Uint32(h[12:])
	n := binary.BigEndian.Uint32(h[16:])
	if n > maxOptReply {
		return 0, nil, handshakeErr("option reply of %d bytes", n)
	}
	if cap(o.buf) < int(n) {
		o.buf = make([]byte, n)
	}
	data = o.buf[:n]
	if _, err := io.ReadFull(o.c, data); err != nil {
		return 0, nil, handshakeErr("reading an option reply: %v", err)
	}
	return typ, data, nil
}

// option sends opt and reads its single reply; error replies other than
// unsupported come back as typ with the server's message in data.
func (o *optConn) option(opt uint32, data []byte) (uint32, []byte, error) {
	if err := o.send(opt, data); err != nil {
		return 0, nil, err
	}
	return o.reply(opt)
}

func (o *optConn) goExport(name string, ex *export) error {
	d := make([]byte, 4+len(name)+2+2)
	binary.BigEndian.PutUint32(d, uint32(len(name)))
	copy(d[4:], name)
	binary.BigEndian.PutUint16(d[4+len(name):], 1)
	binary.BigEndian.PutUint16(d[6+len(name):], infoBlockSize)
	if err := o.send(optGo, d); err != nil {
		return err
	}
	gotExport := false
	for {
		typ, data, err := o.reply(optGo)
		if err != nil {
			return err
		}
		switch {
		case typ == repAck:
			if !gotExport {
				return handshakeErr("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT")
			}
			return nil
		case typ == repInfo:
			if len(data) < 2 {
				return handshakeErr("short NBD_REP_INFO")
			}
			switch binary.BigEndian.Uint16(data) {
			case infoExport:
				if len(data) != 12 {
					return handshakeErr("bad NBD_INFO_EXPORT length %d", len(data))
				}
				ex.size = binary.BigEndian.Uint64(data[2:])
				ex.tflags = binary.BigEndian.Uint16(data[10:])
				gotExport = true
			case infoBlockSize:
				if len(data) != 14 {
					return handshakeErr("bad NBD_INFO_BLOCK_SIZE length %d", len(data))
				}
				ex.minBlock = binary.BigEndian.Uint32(data[2:])
				ex.prefBlock = binary.BigEndian.Uint32(data[6:])
				ex.maxBlock = binary.BigEndian.Uint32(data[10:])
			}
		case typ == repErrUnsup:
			return errUnsupGo
		case typ&(1<<31) != 0:
			return handshakeErr("export %q: %s%s", name, repName(typ), message(data))
		default:
			return handshakeErr("unexpected reply %d to NBD_OPT_GO", typ)
		}
	}
}

// exportName is NBD_OPT_EXPORT_NAME, for servers without NBD_OPT_GO.
func (o *optConn) exportName(name string, ex *export, noZeroes bool) error {
	if err := o.send(optExportName, []byte(name)); err != nil {
		return err
	}
	n := 10
	if !noZeroes {
		n += 124
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(o.c, b); err != nil {
		return handshakeErr("export %q: the server closed the connection (%v)", name, err)
	}
	ex.size = binary.BigEndian.Uint64(b)
	ex.tflags = binary.BigEndian.Uint16(b[8:])
	return nil
}

func message(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	if len(data) > 200 {
		data = data[:200]
	}
	return ": " + string(data)
}

func repName(typ uint32) string {
	switch typ {
	case repAck:
		return "ack"
	case repErrUnsup:
		return "unsupported"
	case 1<<31 + 2:
		return "refused by policy"
	case 1<<31 + 3:
		return "invalid"
	case 1<<31 + 4:
		return "platform error"
	case 1<<31 + 5:
		return "TLS required"
	case 1<<31 + 6:
		return "unknown export"
	case 1<<31 + 7:
		return "server shutting down"
	case 1<<31 + 8:
		return "block size required"
	case 1<<31 + 9:
		return "too big"
	}
	return fmt.Sprintf("reply %#x", typ)
}

// tlsConfig builds the client's TLS configuration from the URI.
func tlsConfig(u *URI) (*tls.Config, error) {
	if !u.TLS {
		return nil, nil
	}
	conf := &tls.Config{ServerName: u.Host, InsecureSkipVerify: !u.VerifyPeer, MinVersion: tls.VersionTLS12}
	dir := u.TLSCertDir
	if dir == "" {
		for _, d := range []string{filepath.Join(os.Getenv("HOME"), ".pki", "libnbd"), "/etc/pki/libnbd"} {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				dir = d
				break
			}
		}
	}
	if dir == "" {
		return conf, nil
	}
	if pem, err := os.ReadFile(filepath.Join(dir, "ca-cert.pem")); err == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate in ca-cert.pem", dir)
		}
		conf.RootCAs = pool
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	cert, key := filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem")
	if _, err := os.Stat(cert); err == nil {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s: client certificate: %w", dir, err)
		}
		conf.Certificates = []tls.Certificate{kp}
	}
	return conf, nil
}
