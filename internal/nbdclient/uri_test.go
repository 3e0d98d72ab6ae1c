package nbdclient

import (
	"errors"
	"testing"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		in                        string
		network, addr, export, hn string
		tls                       bool
		certDir                   string
		verify                    bool
		bad                       bool
	}{
		{in: "nbd://node1/disk0", network: "tcp", addr: "node1:10809", export: "disk0", hn: "node1", verify: true},
		{in: "nbd://10.0.0.2:10810", network: "tcp", addr: "10.0.0.2:10810", export: "", hn: "10.0.0.2", verify: true},
		{in: "nbd://[fd00::1]:999/a%20b", network: "tcp", addr: "[fd00::1]:999", export: "a b", hn: "fd00::1", verify: true},
		{in: "nbds://h/e?tls-certificates=/etc/x&tls-verify-peer=false", network: "tcp", addr: "h:10809", export: "e", hn: "h", tls: true, certDir: "/etc/x"},
		{in: "nbds://h/e?tls-hostname=server.example", network: "tcp", addr: "h:10809", export: "e", hn: "server.example", tls: true, verify: true},
		{in: "nbd+unix:///exp?socket=/run/s.sock", network: "unix", addr: "/run/s.sock", export: "exp", hn: "localhost", verify: true},
		{in: "nbds+unix:///?socket=/s", network: "unix", addr: "/s", export: "", hn: "localhost", tls: true, verify: true},
		{in: "nbd+unix:///exp", bad: true},                 // no socket
		{in: "nbd+unix://host/exp?socket=/s", bad: true},   // host with unix
		{in: "nbd:///exp", bad: true},                      // no host
		{in: "nbd://h:0/", bad: true},                      // bad port
		{in: "nbd://h:99999/", bad: true},                  // bad port
		{in: "nbd://h/?socket=/s", bad: true},              // socket without +unix
		{in: "nbd://h/?tls-certificates=/x", bad: true},    // TLS parameter without nbds
		{in: "nbds://h/?tls-verify-peer=maybe", bad: true}, // bad boolean
		{in: "nbd://h/?frobnicate=1", bad: true},           // unknown parameter
		{in: "http://h/x", bad: true},                      // not NBD
		{in: "/dev/sda", bad: true},                        // a path
	} {
		u, err := ParseURI(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if u.Network != tc.network || u.Addr != tc.addr || u.Export != tc.export || u.Host != tc.hn ||
			u.TLS != tc.tls || u.TLSCertDir != tc.certDir || u.VerifyPeer != tc.verify {
			t.Errorf("%s: got %+v", tc.in, *u)
		}
		if u.String() != tc.in {
			t.Errorf("%s: String() = %s", tc.in, u.String())
		}
	}
	if _, err := ParseURI("/dev/sdb"); !errors.Is(err, ErrNotURI) {
		t.Errorf("a path: want ErrNotURI, got %v", err)
	}
	for s, want := range map[string]bool{"nbd://h/": true, "nbds+unix:///?socket=x": true, "/dev/nbd0": false, "nbdx://h": false, "disk.img": false} {
		if IsURI(s) != want {
			t.Errorf("IsURI(%q) = %v", s, !want)
		}
	}
}
