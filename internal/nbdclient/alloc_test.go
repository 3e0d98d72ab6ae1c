package nbdclient

import (
	"context"
	"testing"

	"mdtool/internal/testkit/nbdkit"
)

// A write or read of the steady state allocates nothing per request in
// the client (the call comes from a pool, the writev vector is the
// connection's).
func TestRequestAllocations(t *testing.T) {
	s := nbdkit.Start(t, "memory", "size=16M")
	u, _ := ParseURI(s.URI("nbd+unix"))
	c, err := Dial(context.Background(), u, Options{Timeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	for i := 0; i < 10; i++ { // warm the pool and the map
		c.WriteAt(buf, 0)
		c.ReadAt(buf, 0)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := c.WriteAt(buf, 4096); err != nil {
			t.Fatal(err)
		}
	}); n > 0.5 {
		t.Errorf("WriteAt allocates %.1f times per request", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := c.ReadAt(buf, 4096); err != nil {
			t.Fatal(err)
		}
	}); n > 0.5 {
		t.Errorf("ReadAt allocates %.1f times per request", n)
	}
}
