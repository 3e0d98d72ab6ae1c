//go:build linux

package ioctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel NBD client's generic netlink interface
// (include/uapi/linux/nbd-netlink.h, Linux 6.1).
const (
	nbdFamilyName    = "nbd"
	nbdGenlVersion   = 1
	sizeofGenlmsghdr = 4 // cmd, version, reserved u16

	nbdCmdConnect     = 1
	nbdCmdDisconnect  = 2
	nbdCmdReconfigure = 3
	nbdCmdStatus      = 5

	nbdAttrIndex             = 1 // u32
	nbdAttrSizeBytes         = 2 // u64
	nbdAttrBlockSizeBytes    = 3 // u64
	nbdAttrTimeout           = 4 // u64, seconds
	nbdAttrServerFlags       = 5 // u64
	nbdAttrClientFlags       = 6 // u64
	nbdAttrSockets           = 7 // nested SOCK_ITEMs
	nbdAttrDeadConnTimeout   = 8 // u64, seconds
	nbdAttrDeviceList        = 9 // nested DEVICE_ITEMs
	nbdAttrBackendIdentifier = 10

	nbdSockItem = 1
	nbdSockFD   = 1 // u32

	nbdDeviceItem      = 1
	nbdDeviceIndex     = 1 // u32
	nbdDeviceConnected = 2 // u8
)

// NBD transmission flags (include/uapi/linux/nbd.h), given to the kernel
// as NBDConfig.ServerFlags.
const (
	NBDFlagHasFlags        = 1 << 0
	NBDFlagReadOnly        = 1 << 1
	NBDFlagSendFlush       = 1 << 2
	NBDFlagSendFUA         = 1 << 3
	NBDFlagSendTrim        = 1 << 5
	NBDFlagSendWriteZeroes = 1 << 6
	NBDFlagCanMultiConn    = 1 << 8
)

// ErrNoNBD: the kernel has no NBD client (no "nbd" generic netlink family,
// and "modprobe nbd" did not add it).
var ErrNoNBD = errors.New("no kernel NBD client (module nbd not available)")

// NBDConfig is what NBD_CMD_CONNECT and NBD_CMD_RECONFIGURE give the
// kernel. Zero fields are left out (the kernel's defaults).
type NBDConfig struct {
	Size      uint64 // device size in bytes (required by connect)
	BlockSize uint64 // logical = physical block size: a power of two, 512..PAGE_SIZE
	// Timeout is the request timeout in seconds (0: the kernel's default,
	// which with one connection only warns about stuck requests).
	Timeout uint64
	// DeadConnTimeout is how long, in seconds, requests wait for a
	// reconnection (NBD_CMD_RECONFIGURE) once every connection is dead.
	DeadConnTimeout uint64
	ServerFlags     uint64 // NBDFlag* (transmission flags)
	ClientFlags     uint64
	// Backend identifies what the device serves; a reconfiguration with
	// another identifier is refused by the kernel.
	Backend string
	// Sockets are the kernel's ends of the connections (file descriptors
	// of connected stream sockets); the kernel takes its own reference.
	Sockets []int
}

// NBDConnect configures an NBD device with NBD_CMD_CONNECT: index -1 lets
// the kernel pick a free one. It returns the index of /dev/nbdN.
func NBDConnect(index int, cfg NBDConfig) (int, error) {
	attrs := cfg.attrs()
	if index >= 0 {
		attrs = append(nlU32(nbdAttrIndex, uint32(index)), attrs...)
	}
	msgs, err := nbdRequest(nbdCmdConnect, attrs)
	if err != nil {
		return -1, fmt.Errorf("NBD connect: %w", err)
	}
	for _, m := range msgs {
		if v, ok := findAttr(m, nbdAttrIndex); ok && len(v) >= 4 {
			return int(binary.NativeEndian.Uint32(v)), nil
		}
	}
	if index >= 0 {
		return index, nil
	}
	return -1, errors.New("NBD connect: the kernel did not say which device")
}

// NBDReconfigure gives the configured device index new sockets (and the
// other fields of cfg that are set) with NBD_CMD_RECONFIGURE; each socket
// replaces a dead connection.
func NBDReconfigure(index int, cfg NBDConfig) error {
	cfg.Size, cfg.BlockSize, cfg.ServerFlags = 0, 0, 0 // not changed on reconfiguration
	attrs := append(nlU32(nbdAttrIndex, uint32(index)), cfg.attrs()...)
	if _, err := nbdRequest(nbdCmdReconfigure, attrs); err != nil {
		return fmt.Errorf("NBD reconfigure nbd%d: %w", index, err)
	}
	return nil
}

// NBDDisconnect disconnects device index (NBD_CMD_DISCONNECT): the kernel
// sends NBD_CMD_DISC on every connection, shuts them down and fails the
// requests still queued.
func NBDDisconnect(index int) error {
	if _, err := nbdRequest(nbdCmdDisconnect, nlU32(nbdAttrIndex, uint32(index))); err != nil {
		return fmt.Errorf("NBD disconnect nbd%d: %w", index, err)
	}
	return nil
}

// NBDStatus says whether device index exists and is configured
// (NBD_CMD_STATUS).
func NBDStatus(index int) (exists, connected bool, err error) {
	msgs, err := nbdRequest(nbdCmdStatus, nlU32(nbdAttrIndex, uint32(index)))
	if err != nil {
		return false, false, fmt.Errorf("NBD status nbd%d: %w", index, err)
	}
	for _, m := range msgs {
		list, ok := findAttr(m, nbdAttrDeviceList)
		if !ok {
			continue
		}
		for _, item := range parseAttrs(list) {
			if item.typ != nbdDeviceItem {
				continue
			}
			var idx uint32
			var conn bool
			for _, a := range parseAttrs(item.val) {
				switch {
				case a.typ == nbdDeviceIndex && len(a.val) >= 4:
					idx = binary.NativeEndian.Uint32(a.val)
				case a.typ == nbdDeviceConnected && len(a.val) >= 1:
					conn = a.val[0] != 0
				}
			}
			if int(idx) == index {
				return true, conn, nil
			}
		}
	}
	return false, false, nil
}

func (cfg NBDConfig) attrs() []byte {
	var b []byte
	add := func(typ uint16, v uint64) {
		if v != 0 {
			b = append(b, nlU64(typ, v)...)
		}
	}
	add(nbdAttrSizeBytes, cfg.Size)
	add(nbdAttrBlockSizeBytes, cfg.BlockSize)
	add(nbdAttrTimeout, cfg.Timeout)
	add(nbdAttrDeadConnTimeout, cfg.DeadConnTimeout)
	add(nbdAttrServerFlags, cfg.ServerFlags)
	// Client flags are always sent on connect and reconfigure: 0 clears
	// DISCONNECT_ON_CLOSE and DESTROY_ON_DISCONNECT.
	b = append(b, nlU64(nbdAttrClientFlags, cfg.ClientFlags)...)
	if cfg.Backend != "" {
		b = append(b, nlAttr(nbdAttrBackendIdentifier, append([]byte(cfg.Backend), 0))...)
	}
	if len(cfg.Sockets) > 0 {
		var socks []byte
		for _, fd := range cfg.Sockets {
			socks = append(socks, nlAttr(nbdSockItem|unix.NLA_F_NESTED, nlU32(nbdSockFD, uint32(fd)))...)
		}
		b = append(b, nlAttr(nbdAttrSockets|unix.NLA_F_NESTED, socks)...)
	}
	return b
}

// ---- generic netlink, the little of it NBD needs ----

func nlAttr(typ uint16, val []byte) []byte {
	n := 4 + len(val)
	b := make([]byte, nlAlign(n))
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], val)
	return b
}

func nlU32(typ uint16, v uint32) []byte {
	var p [4]byte
	binary.NativeEndian.PutUint32(p[:], v)
	return nlAttr(typ, p[:])
}

func nlU64(typ uint16, v uint64) []byte {
	var p [8]byte
	binary.NativeEndian.PutUint64(p[:], v)
	return nlAttr(typ, p[:])
}

func nlAlign(n int) int { return (n + 3) &^ 3 }

type nlAttribute struct {
	typ uint16 // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
	val []byte
}

// parseAttrs splits a run of netlink attributes; a malformed tail is
// ignored.
func parseAttrs(b []byte) []nlAttribute {
	var out []nlAttribute
	for len(b) >= 4 {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		if n < 4 || n > len(b) {
			break
		}
		out = append(out, nlAttribute{typ: binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), val: b[4:n]})
		b = b[min(nlAlign(n), len(b)):]
	}
	return out
}

// findAttr finds a top-level attribute in a generic netlink message
// payload (after the genlmsghdr).
func findAttr(payload []byte, typ uint16) ([]byte, bool) {
	for _, a := range parseAttrs(payload) {
		if a.typ == typ {
			return a.val, true
		}
	}
	return nil, false
}

// genlMessage builds one request: nlmsghdr, genlmsghdr, attributes.
func genlMessage(family uint16, cmd, version uint8, seq uint32, attrs []byte) []byte {
	n := unix.SizeofNlMsghdr + sizeofGenlmsghdr + len(attrs)
	b := make([]byte, n)
	binary.NativeEndian.PutUint32(b[0:], uint32(n))
	binary.NativeEndian.PutUint16(b[4:], family)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b[16], b[17] = cmd, version
	copy(b[unix.SizeofNlMsghdr+sizeofGenlmsghdr:], attrs)
	return b
}

// genlCall sends one request on a fresh NETLINK_GENERIC socket and returns
// the payloads (after the genlmsghdr) of the replies before the ack.
func genlCall(family uint16, cmd, version uint8, attrs []byte) ([][]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK)", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("bind(AF_NETLINK)", err)
	}
	const seq = 1
	if err := unix.Sendto(fd, genlMessage(family, cmd, version, seq, attrs), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto(AF_NETLINK)", err)
	}
	var out [][]byte
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("recvfrom(AF_NETLINK)", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("netlink: short error message")
				}
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return out, syscall.Errno(-e)
				}
				return out, nil // the ack
			case unix.NLMSG_DONE:
				return out, nil
			default:
				if len(m.Data) >= sizeofGenlmsghdr {
					out = append(out, append([]byte(nil), m.Data[sizeofGenlmsghdr:]...))
				}
			}
		}
	}
}

var (
	nbdFamilyMu sync.Mutex
	nbdFamilyID uint16
	nbdMissing  bool
)

// canLoadModules says whether modprobe can work: the kernel loads modules
// (/proc/modules) and has a module tree.
func canLoadModules() bool {
	if _, err := os.Stat("/proc/modules"); err != nil {
		return false
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	_, err := os.Stat("/lib/modules/" + unix.ByteSliceToString(u.Release[:]))
	return err == nil
}

// nbdFamily resolves the "nbd" generic netlink family, loading the module
// (modprobe nbd) when it is missing.
func nbdFamily() (uint16, error) {
	nbdFamilyMu.Lock()
	defer nbdFamilyMu.Unlock()
	if nbdFamilyID != 0 {
		return nbdFamilyID, nil
	}
	if nbdMissing {
		return 0, ErrNoNBD
	}
	id, err := genlFamily(nbdFamilyName)
	if errors.Is(err, syscall.ENOENT) && canLoadModules() {
		if p, lerr := exec.LookPath("modprobe"); lerr == nil {
			exec.Command(p, "-q", "nbd").Run()
			id, err = genlFamily(nbdFamilyName)
		}
	}
	if errors.Is(err, syscall.ENOENT) {
		nbdMissing = true // for this process: modprobe is not tried again
		return 0, ErrNoNBD
	}
	if err != nil {
		return 0, err
	}
	nbdFamilyID = id
	return id, nil
}

// genlFamily asks the generic netlink controller for a family's id.
func genlFamily(name string) (uint16, error) {
	msgs, err := genlCall(unix.GENL_ID_CTRL, unix.CTRL_CMD_GETFAMILY, 1,
		nlAttr(unix.CTRL_ATTR_FAMILY_NAME, append([]byte(name), 0)))
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		if v, ok := findAttr(m, unix.CTRL_ATTR_FAMILY_ID); ok && len(v) >= 2 {
			return binary.NativeEndian.Uint16(v), nil
		}
	}
	return 0, syscall.ENOENT
}

// NBDAvailable says whether the kernel NBD client is there (loading the
// module if needed); the error says why not.
func NBDAvailable() error {
	_, err := nbdFamily()
	return err
}

func nbdRequest(cmd uint8, attrs []byte) ([][]byte, error) {
	fam, err := nbdFamily()
	if err != nil {
		return nil, err
	}
	return genlCall(fam, cmd, nbdGenlVersion, attrs)
}
