// Package nbdclient is mdtool's NBD client: it opens an export of any NBD
// server (nbdkit, qemu-nbd, qemu-storage-daemon, nbd-server, mdtool) named
// by a libnbd URI, so that a remote export can be an array member.
//
// The client speaks the fixed-newstyle handshake (NBD_OPT_STARTTLS,
// NBD_OPT_STRUCTURED_REPLY, NBD_OPT_GO with NBD_INFO_BLOCK_SIZE, and
// NBD_OPT_EXPORT_NAME for old servers), then pipelines requests over one
// or more connections (several only when the server advertises
// NBD_FLAG_CAN_MULTI_CONN), with simple or structured replies.
// A request that gets no reply within the timeout fails the whole client:
// every pending and later request returns an error wrapping [ErrTimeout],
// so that the array fails the member instead of stalling.
package nbdclient

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// DefaultPort is the IANA port of NBD.
const DefaultPort = 10809

// URI is a parsed NBD URI (libnbd's syntax, a subset of it):
//
//	nbd://HOST[:PORT][/EXPORT]
//	nbds://HOST[:PORT][/EXPORT][?tls-certificates=DIR&tls-verify-peer=false&tls-hostname=NAME]
//	nbd+unix:///[EXPORT]?socket=PATH
//	nbds+unix:///[EXPORT]?socket=PATH[&tls-certificates=DIR...]
//
// For TLS, DIR holds ca-cert.pem (the CA that signed the server, else the
// system's CAs), and optionally client-cert.pem and client-key.pem (the
// client certificate), as libnbd and nbdkit name them.
type URI struct {
	Raw        string
	TLS        bool
	Network    string // "tcp" or "unix"
	Addr       string // host:port, or the socket path
	Host       string // the TLS server name
	Export     string
	TLSCertDir string
	VerifyPeer bool
}

// ErrNotURI: the string is not an NBD URI (callers use this to treat it
// as a path instead).
var ErrNotURI = errors.New("not an NBD URI")

// IsURI reports whether s has an NBD URI scheme.
func IsURI(s string) bool {
	i := strings.Index(s, "://")
	if i < 0 {
		return false
	}
	switch s[:i] {
	case "nbd", "nbds", "nbd+unix", "nbds+unix":
		return true
	}
	return false
}

// ParseURI parses an NBD URI.
func ParseURI(s string) (*URI, error) {
	if !IsURI(s) {
		return nil, fmt.Errorf("%q: %w", s, ErrNotURI)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	r := &URI{Raw: s, VerifyPeer: true}
	r.TLS = strings.HasPrefix(u.Scheme, "nbds")
	q := u.Query()
	for k := range q {
		switch k {
		case "socket", "tls-certificates", "tls-verify-peer", "tls-hostname":
		default:
			return nil, fmt.Errorf("%q: unsupported URI parameter %q", s, k)
		}
	}
	if strings.HasSuffix(u.Scheme, "+unix") {
		if u.Host != "" {
			return nil, fmt.Errorf("%q: a unix-socket URI has no host", s)
		}
		r.Network, r.Addr = "unix", q.Get("socket")
		if r.Addr == "" {
			return nil, fmt.Errorf("%q: socket= is missing", s)
		}
		r.Host = "localhost"
	} else {
		if q.Get("socket") != "" {
			return nil, fmt.Errorf("%q: socket= needs the nbd+unix scheme", s)
		}
		host, port := u.Hostname(), u.Port()
		if host == "" {
			return nil, fmt.Errorf("%q: the host is missing", s)
		}
		if port == "" {
			port = strconv.Itoa(DefaultPort)
		} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", s, port)
		}
		r.Network, r.Addr, r.Host = "tcp", net.JoinHostPort(host, port), host
	}
	r.Export = strings.TrimPrefix(u.Path, "/")
	if len(r.Export) > 4096 {
		return nil, fmt.Errorf("%q: export name longer than 4096 bytes", s)
	}
	if d := q.Get("tls-certificates"); d != "" {
		r.TLSCertDir = d
	}
	if h := q.Get("tls-hostname"); h != "" {
		r.Host = h
	}
	switch v := q.Get("tls-verify-peer"); v {
	case "", "true", "1", "yes":
	case "false", "0", "no":
		r.VerifyPeer = false
	default:
		return nil, fmt.Errorf("%q: bad tls-verify-peer %q", s, v)
	}
	if !r.TLS && (r.TLSCertDir != "" || q.Has("tls-verify-peer")) {
		return nil, fmt.Errorf("%q: TLS parameters need the nbds scheme", s)
	}
	return r, nil
}

// String is the URI as given.
func (u *URI) String() string { return u.Raw }
