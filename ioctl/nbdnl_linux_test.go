//go:build linux

package ioctl

import (
	"encoding/binary"
	"testing"
)

// TestNBDConnectAttrs checks the attributes NBD_CMD_CONNECT sends: each
// one 4-byte aligned with the kernel's types (u64 sizes and flags, the
// sockets nested as SOCK_ITEM{SOCK_FD u32}).
func TestNBDConnectAttrs(t *testing.T) {
	cfg := NBDConfig{Size: 1 << 30, BlockSize: 4096, Timeout: 600, DeadConnTimeout: 120,
		ServerFlags: NBDFlagHasFlags | NBDFlagSendFlush, Backend: "mdtool:x", Sockets: []int{7, 9}}
	b := cfg.attrs()
	if len(b)%4 != 0 {
		t.Fatalf("attributes are %d bytes, not 4-byte aligned", len(b))
	}
	got := map[uint16][]byte{}
	for _, a := range parseAttrs(b) {
		got[a.typ] = a.val
	}
	u64 := func(typ uint16) uint64 {
		v, ok := got[typ]
		if !ok || len(v) != 8 {
			t.Fatalf("attribute %d: %x", typ, v)
		}
		return binary.NativeEndian.Uint64(v)
	}
	if u64(nbdAttrSizeBytes) != 1<<30 || u64(nbdAttrBlockSizeBytes) != 4096 || u64(nbdAttrTimeout) != 600 ||
		u64(nbdAttrDeadConnTimeout) != 120 || u64(nbdAttrServerFlags) != 5 || u64(nbdAttrClientFlags) != 0 {
		t.Fatalf("attributes: %v", got)
	}
	if string(got[nbdAttrBackendIdentifier]) != "mdtool:x\x00" {
		t.Fatalf("backend identifier %q", got[nbdAttrBackendIdentifier])
	}
	var fds []uint32
	for _, item := range parseAttrs(got[nbdAttrSockets]) {
		if item.typ != nbdSockItem {
			t.Fatalf("socket list holds attribute %d", item.typ)
		}
		v, ok := findAttr(item.val, nbdSockFD)
		if !ok || len(v) != 4 {
			t.Fatalf("socket item %x", item.val)
		}
		fds = append(fds, binary.NativeEndian.Uint32(v))
	}
	if len(fds) != 2 || fds[0] != 7 || fds[1] != 9 {
		t.Fatalf("sockets %v", fds)
	}
	m := genlMessage(0x20, nbdCmdConnect, nbdGenlVersion, 1, b)
	if int(binary.NativeEndian.Uint32(m)) != len(m) || m[16] != nbdCmdConnect || m[17] != 1 {
		t.Fatalf("message header %x", m[:20])
	}
}

// TestGenlFamily resolves the controller's own family ("nlctrl", id
// GENL_ID_CTRL) through the same request path NBD uses, and fails on a
// family that does not exist.
func TestGenlFamily(t *testing.T) {
	id, err := genlFamily("nlctrl")
	if err != nil || id != 0x10 {
		t.Fatalf("nlctrl: id %#x, %v", id, err)
	}
	if _, err := genlFamily("mdtool-no-such-family"); err == nil {
		t.Fatal("an unknown generic netlink family resolved")
	}
}
