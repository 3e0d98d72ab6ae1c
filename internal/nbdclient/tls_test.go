package nbdclient

import (
	"context"
	"mdtool/internal/testkit/nbdkit"
	"net/url"
	"testing"
	"time"
)

// nbds+unix with client certificates: a client with a certificate signed
// by the server's CA gets in, one without is refused by the server.
func TestTLSClientCertificates(t *testing.T) {
	sdir, cdir, nocert := nbdkit.TLSDirs(t, "localhost")

	base, _ := startNbdkit(t, "nbds+unix", "--tls=require", "--tls-certificates="+sdir, "--tls-verify-peer", "memory", "size=16M")
	c := dial(t, base+"&tls-certificates="+url.QueryEscape(cdir), Options{})
	want := []byte("over TLS, certified")
	buf := make([]byte, 4096)
	copy(buf, want)
	if _, err := c.WriteAt(buf, 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if _, err := c.ReadAt(got, 8192); err != nil || string(got[:len(want)]) != string(want) {
		t.Fatalf("read back %q, %v", got[:len(want)], err)
	}

	for name, uri := range map[string]string{
		"no client certificate": base + "&tls-certificates=" + url.QueryEscape(nocert),
		"plain nbd":             "nbd+unix" + base[len("nbds+unix"):],
	} {
		u, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c2, err := Dial(ctx, u, Options{})
		cancel()
		if err == nil {
			// TLS 1.3 reports a refused client certificate on first use.
			_, err = c2.ReadAt(got, 0)
			c2.Close()
		}
		if err == nil {
			t.Fatalf("%s: the server let the client in", name)
		}
		t.Logf("%s: refused: %v", name, err)
	}
}
