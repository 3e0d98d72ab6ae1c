package nbdkit

import (
	"net"
	"testing"
)

// SetLink takes the host's veth down and up again, as ip link set does.
func TestSetLink(t *testing.T) {
	h := NewHost(t)
	for _, up := range []bool{false, true, false} {
		if err := h.SetLink(up); err != nil {
			t.Fatal(err)
		}
		ifi, err := net.InterfaceByName(h.HostIf)
		if err != nil {
			t.Fatal(err)
		}
		if got := ifi.Flags&net.FlagUp != 0; got != up {
			t.Fatalf("after SetLink(%v): %s is up=%v (flags %v)", up, h.HostIf, got, ifi.Flags)
		}
	}
}
