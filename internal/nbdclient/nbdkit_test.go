package nbdclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"mdtool/internal/testkit/nbdkit"
	"strings"
	"testing"
	"time"
)

func startNbdkit(t *testing.T, scheme string, args ...string) (uri string, stop func()) {
	t.Helper()
	s := nbdkit.Start(t, args...)
	return s.URI(scheme), s.Stop
}

func dial(t *testing.T, uri string, o Options) *Client {
	t.Helper()
	u, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(ctx, u, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestNbdkitMemoryRoundTrip(t *testing.T) {
	for _, conns := range []int{1, 4} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			uri, _ := startNbdkit(t, "nbd+unix", "memory", "size=64M")
			c := dial(t, uri, Options{Conns: conns})
			if c.Size() != 64<<20 {
				t.Fatalf("size %d", c.Size())
			}
			if c.Conns() != conns {
				t.Fatalf("nbdkit memory advertises multi-conn: want %d connections, got %d", conns, c.Conns())
			}
			// Unwritten: a hole, read back as zeroes through structured replies.
			p := make([]byte, 1<<20)
			for i := range p {
				p[i] = 0xee
			}
			if _, err := c.ReadAt(p, 3<<20); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p, make([]byte, len(p))) {
				t.Fatal("a hole did not read as zeroes")
			}
			// Pipelined writes from many goroutines, then read back.
			want := make([]byte, 8<<20)
			rand.Read(want)
			errs := make(chan error, 64)
			for i := 0; i < 64; i++ {
				go func(i int) {
					off := int64(i) * 128 << 10
					_, err := c.WriteAt(want[off:off+128<<10], off)
					errs <- err
				}(i)
			}
			for i := 0; i < 64; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			if _, err := c.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("data differs after pipelined writes")
			}
			if _, err := c.WriteAtFUA(want[:4096], 60<<20); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteZeroes(0, 1<<20, false); err != nil {
				t.Fatal(err)
			}
			if err := c.Discard(1<<20, 1<<20); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadAt(got[:2<<20], 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:1<<20], make([]byte, 1<<20)) {
				t.Fatal("write-zeroes range is not zero")
			}
			// Beyond the end: refused locally, the client stays usable.
			if _, err := c.ReadAt(got[:4096], c.Size()-512); err == nil {
				t.Fatal("read past the end succeeded")
			}
			if _, err := c.ReadAt(got[:4096], 0); err != nil {
				t.Fatalf("client unusable after a refused request: %v", err)
			}
		})
	}
}

// The server's error replies come back as RemoteError with the errno.
func TestNbdkitErrorReply(t *testing.T) {
	uri, _ := startNbdkit(t, "nbd+unix", "--filter=error", "memory", "size=16M", "error=EIO", "error-pread-rate=100%")
	c := dial(t, uri, Options{})
	_, err := c.ReadAt(make([]byte, 4096), 0)
	var re *RemoteError
	if !errors.As(err, &re) || !errors.Is(err, errEIO) {
		t.Fatalf("want a RemoteError with EIO, got %v", err)
	}
	if _, err := c.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatalf("a write after a failed read: %v", err)
	}
}

// A server that stops answering fails the client within the timeout, and
// every request after that fails at once.
func TestTimeoutFailsClient(t *testing.T) {
	uri, _ := startNbdkit(t, "nbd+unix", "--filter=delay", "memory", "size=16M", "rdelay=3600")
	c := dial(t, uri, Options{Timeout: 300 * time.Millisecond})
	if _, err := c.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.ReadAt(make([]byte, 4096), 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("want ErrTimeout, got %v", err)
		}
	case <-time.After(120 * time.Second):
		t.Fatal("the read never failed")
	}
	if _, err := c.WriteAt(make([]byte, 4096), 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a request after the failure: want ErrTimeout, got %v", err)
	}
	if !errors.Is(c.Err(), ErrTimeout) {
		t.Fatalf("Err() = %v", c.Err())
	}
}

// A killed server fails pending and later requests with ErrConnLost.
func TestServerGone(t *testing.T) {
	uri, stop := startNbdkit(t, "nbd+unix", "memory", "size=16M")
	c := dial(t, uri, Options{Timeout: -1})
	stop()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.ReadAt(make([]byte, 4096), 0)
	}
	if !errors.Is(err, ErrConnLost) {
		t.Fatalf("want ErrConnLost, got %v", err)
	}
}

func TestUnknownExport(t *testing.T) {
	uri, _ := startNbdkit(t, "nbd+unix", "memory", "size=16M")
	u, err := ParseURI(strings.Replace(uri, ":///", ":///nosuch", 1))
	if err != nil {
		t.Fatal(err)
	}
	// nbdkit ignores export names by default: it serves the one export.
	c, err := Dial(context.Background(), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
