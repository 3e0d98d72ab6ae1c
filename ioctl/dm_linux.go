//go:build linux

package ioctl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device-mapper through its control node (include/uapi/linux/dm-ioctl.h):
// every command is one ioctl whose argument is a struct dm_ioctl followed
// by its data (for DM_TABLE_LOAD: dm_target_spec + parameter string per
// target, each 8-byte aligned).

// DMControlPath is device-mapper's control node.
const DMControlPath = "/dev/mapper/control"

// struct dm_ioctl: 312 bytes on every 64-bit architecture.
const (
	dmIoctlSize   = 312
	dmNameLen     = 128
	dmUUIDLen     = 129
	dmMaxTypeName = 16
	dmSpecSize    = 40 // struct dm_target_spec, the parameters follow

	dmOffVersion     = 0
	dmOffDataSize    = 12
	dmOffDataStart   = 16
	dmOffTargetCount = 20
	dmOffOpenCount   = 24
	dmOffFlags       = 28
	dmOffEventNr     = 32
	dmOffDev         = 40
	dmOffName        = 48
	dmOffUUID        = dmOffName + dmNameLen // 176

	dmSpecOffStart  = 0
	dmSpecOffLength = 8
	dmSpecOffStatus = 16
	dmSpecOffNext   = 20
	dmSpecOffType   = 24
)

// Interface version sent (the kernel accepts any minor up to its own).
const (
	dmVersionMajor = 4
	dmVersionMinor = 0
)

// Commands (enum in dm-ioctl.h) and the ioctl numbers:
// _IOWR(0xfd, cmd, struct dm_ioctl).
const (
	dmVersionCmd     = 0
	dmDevCreateCmd   = 3
	dmDevRemoveCmd   = 4
	dmDevSuspendCmd  = 6
	dmDevStatusCmd   = 7
	dmTableLoadCmd   = 9
	dmTableClearCmd  = 10
	dmTableStatusCmd = 12
)

func dmRequest(cmd uint32) uint32 {
	return 3<<30 | dmIoctlSize<<16 | 0xfd<<8 | cmd
}

// Flags of struct dm_ioctl.
const (
	DMReadOnlyFlag        = 1 << 0
	DMSuspendFlag         = 1 << 1
	DMStatusTableFlag     = 1 << 4
	DMActivePresentFlag   = 1 << 5
	DMInactivePresentFlag = 1 << 6
	DMBufferFullFlag      = 1 << 8
	DMSkipLockfsFlag      = 1 << 10
	DMNoFlushFlag         = 1 << 11
	DMDeferredRemove      = 1 << 17
)

// DMTarget is one line of a device-mapper table, as dmsetup prints it:
// start and length in sectors, the target type and its parameters.
type DMTarget struct {
	Start, Length uint64
	Type          string
	Params        string
}

// DMInfo is what device-mapper says of a device.
type DMInfo struct {
	Name        string
	Major       uint32
	Minor       uint32
	OpenCount   int32
	Flags       uint32
	TargetCount uint32
	EventNr     uint32
}

// Path is the device's node, /dev/dm-N (made by devtmpfs).
func (i DMInfo) Path() string { return DMBlockPath(i.Minor) }

// DMBlockPath is /dev/dm-N for minor N.
func DMBlockPath(minor uint32) string { return "/dev/dm-" + strconv.FormatUint(uint64(minor), 10) }

// dmHeader encodes struct dm_ioctl for a buffer of size bytes, with the
// data (if any) right after it.
func dmHeader(buf []byte, name string, flags uint32, targets uint32) error {
	if len(name) >= dmNameLen || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("device-mapper: name %q too long", name)
	}
	clear(buf[:dmIoctlSize])
	ne := binary.NativeEndian
	ne.PutUint32(buf[dmOffVersion:], dmVersionMajor)
	ne.PutUint32(buf[dmOffVersion+4:], dmVersionMinor)
	ne.PutUint32(buf[dmOffDataSize:], uint32(len(buf)))
	ne.PutUint32(buf[dmOffDataStart:], dmIoctlSize)
	ne.PutUint32(buf[dmOffTargetCount:], targets)
	ne.PutUint32(buf[dmOffFlags:], flags)
	copy(buf[dmOffName:dmOffName+dmNameLen], name)
	return nil
}

func dmInfo(buf []byte) DMInfo {
	ne := binary.NativeEndian
	dev := ne.Uint64(buf[dmOffDev:])
	// the kernel encodes dev with huge_encode_dev (new_encode_dev)
	return DMInfo{
		Name:        cString(buf[dmOffName : dmOffName+dmNameLen]),
		Major:       uint32(dev&0xfff00) >> 8,
		Minor:       uint32(dev&0xff) | uint32(dev>>12)&0xfff00,
		OpenCount:   int32(ne.Uint32(buf[dmOffOpenCount:])),
		Flags:       ne.Uint32(buf[dmOffFlags:]),
		TargetCount: ne.Uint32(buf[dmOffTargetCount:]),
		EventNr:     ne.Uint32(buf[dmOffEventNr:]),
	}
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func align8(n int) int { return (n + 7) &^ 7 }

// encodeDMTable is the data of DM_TABLE_LOAD: per target a dm_target_spec
// whose next is the distance to the next one, the parameter string
// (NUL-terminated) padded to 8 bytes.
func encodeDMTable(ts []DMTarget) ([]byte, error) {
	var out []byte
	for _, t := range ts {
		if len(t.Type) >= dmMaxTypeName || t.Type == "" {
			return nil, fmt.Errorf("device-mapper: target type %q", t.Type)
		}
		n := align8(dmSpecSize + len(t.Params) + 1)
		b := make([]byte, n)
		ne := binary.NativeEndian
		ne.PutUint64(b[dmSpecOffStart:], t.Start)
		ne.PutUint64(b[dmSpecOffLength:], t.Length)
		ne.PutUint32(b[dmSpecOffNext:], uint32(n))
		copy(b[dmSpecOffType:dmSpecOffType+dmMaxTypeName], t.Type)
		copy(b[dmSpecSize:], t.Params)
		out = append(out, b...)
	}
	return out, nil
}

// decodeDMTable reads DM_TABLE_STATUS's data: there next is the offset of
// the next spec from the first one.
func decodeDMTable(data []byte, count uint32) ([]DMTarget, error) {
	var ts []DMTarget
	off := 0
	ne := binary.NativeEndian
	for i := uint32(0); i < count; i++ {
		if off < 0 || off+dmSpecSize > len(data) {
			return nil, fmt.Errorf("device-mapper: table spec %d at %d beyond %d bytes", i, off, len(data))
		}
		s := data[off:]
		t := DMTarget{Start: ne.Uint64(s[dmSpecOffStart:]), Length: ne.Uint64(s[dmSpecOffLength:]),
			Type: cString(s[dmSpecOffType : dmSpecOffType+dmMaxTypeName]), Params: cString(s[dmSpecSize:])}
		ts = append(ts, t)
		off = int(ne.Uint32(s[dmSpecOffNext:]))
	}
	return ts, nil
}

// dmCall runs one command with data after the header; out is the buffer
// as the kernel left it (header then data).
func dmCall(cmd uint32, name, uuid string, flags uint32, targets uint32, data []byte, room int) ([]byte, error) {
	f, err := os.OpenFile(DMControlPath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := align8(dmIoctlSize + max(len(data), room))
	words := make([]uint64, n/8) // 8-byte aligned
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	if err := dmHeader(buf, name, flags, targets); err != nil {
		return nil, err
	}
	copy(buf[dmOffUUID:dmOffUUID+dmUUIDLen-1], uuid)
	copy(buf[dmIoctlSize:], data)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(dmRequest(cmd)), uintptr(unsafe.Pointer(&words[0])))
	if errno != 0 {
		return buf, errno
	}
	return buf, nil
}

// DMCreate makes device name with the table and activates it (create,
// load, resume); on failure nothing is left.
func DMCreate(name, uuid string, table []DMTarget) (DMInfo, error) {
	if len(uuid) >= dmUUIDLen {
		return DMInfo{}, fmt.Errorf("device-mapper: uuid %q too long", uuid)
	}
	data, err := encodeDMTable(table)
	if err != nil {
		return DMInfo{}, err
	}
	if _, err := dmCall(dmDevCreateCmd, name, uuid, 0, 0, nil, 0); err != nil {
		return DMInfo{}, fmt.Errorf("device-mapper: create %s: %w", name, err)
	}
	if _, err := dmCall(dmTableLoadCmd, name, "", 0, uint32(len(table)), data, 0); err != nil {
		DMRemove(name)
		return DMInfo{}, fmt.Errorf("device-mapper: load table of %s: %w", name, err)
	}
	out, err := dmCall(dmDevSuspendCmd, name, "", 0, 0, nil, 0) // resume
	if err != nil {
		DMRemove(name)
		return DMInfo{}, fmt.Errorf("device-mapper: resume %s: %w", name, err)
	}
	return dmInfo(out), nil
}

// DMReload replaces the table of a device (load, suspend, resume): its
// users see the new mapping from the next request on. With noFlush the
// suspend neither waits for the old table's queued I/O (a dead door: it is
// requeued to the new table) nor freezes the file system on the device.
func DMReload(name string, table []DMTarget, noFlush bool) error {
	data, err := encodeDMTable(table)
	if err != nil {
		return err
	}
	if _, err := dmCall(dmTableLoadCmd, name, "", 0, uint32(len(table)), data, 0); err != nil {
		return fmt.Errorf("device-mapper: load table of %s: %w", name, err)
	}
	fl := uint32(DMSuspendFlag)
	if noFlush {
		fl |= DMNoFlushFlag | DMSkipLockfsFlag
	}
	if _, err := dmCall(dmDevSuspendCmd, name, "", fl, 0, nil, 0); err != nil {
		dmCall(dmTableClearCmd, name, "", 0, 0, nil, 0)
		return fmt.Errorf("device-mapper: suspend %s: %w", name, err)
	}
	if _, err := dmCall(dmDevSuspendCmd, name, "", 0, 0, nil, 0); err != nil {
		return fmt.Errorf("device-mapper: resume %s: %w", name, err)
	}
	return nil
}

// DMRemove removes a device; EBUSY (errors.Is) while it is open.
func DMRemove(name string) error {
	_, err := dmCall(dmDevRemoveCmd, name, "", 0, 0, nil, 0)
	if err != nil {
		return fmt.Errorf("device-mapper: remove %s: %w", name, err)
	}
	return nil
}

// DMRemoveDeferred removes a device, or when it is open, marks it to be
// removed when its last user closes it.
func DMRemoveDeferred(name string) error {
	_, err := dmCall(dmDevRemoveCmd, name, "", DMDeferredRemove, 0, nil, 0)
	if err != nil {
		return fmt.Errorf("device-mapper: remove %s (deferred): %w", name, err)
	}
	return nil
}

// DMStatus describes a device; ENXIO (errors.Is) when there is none.
func DMStatus(name string) (DMInfo, error) {
	out, err := dmCall(dmDevStatusCmd, name, "", 0, 0, nil, 0)
	if err != nil {
		return DMInfo{}, err
	}
	return dmInfo(out), nil
}

// DMTable is the active table of a device.
func DMTable(name string) ([]DMTarget, error) {
	out, err := dmCall(dmTableStatusCmd, name, "", DMStatusTableFlag, 0, nil, 16<<10)
	if err != nil {
		return nil, err
	}
	inf := dmInfo(out)
	if inf.Flags&DMBufferFullFlag != 0 {
		return nil, fmt.Errorf("device-mapper: table of %s too large", name)
	}
	start := int(binary.NativeEndian.Uint32(out[dmOffDataStart:]))
	end := int(binary.NativeEndian.Uint32(out[dmOffDataSize:]))
	if start < dmIoctlSize || end > len(out) || start > end {
		return nil, fmt.Errorf("device-mapper: table of %s: data %d..%d", name, start, end)
	}
	return decodeDMTable(out[start:end], inf.TargetCount)
}

// ErrNoDM says that device-mapper is not there.
var ErrNoDM = errors.New("device-mapper: " + DMControlPath + " not found (modprobe dm_mod)")

// DMAvailable says whether device-mapper can be used: its control node
// exists, after `modprobe dm_mod` if needed, made from
// /sys/class/misc/device-mapper/dev when devtmpfs has not (yet).
func DMAvailable() error {
	if _, err := os.Stat(DMControlPath); err == nil {
		return nil
	}
	if _, err := os.Stat("/sys/class/misc/device-mapper/dev"); err != nil && canLoadModules() {
		if p, lerr := exec.LookPath("modprobe"); lerr == nil {
			exec.Command(p, "-q", "dm_mod").Run()
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, err := os.Stat(DMControlPath); err == nil {
			return nil
		}
		b, err := os.ReadFile("/sys/class/misc/device-mapper/dev")
		if err != nil {
			return ErrNoDM
		}
		if time.Now().After(deadline) {
			maj, min, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
			ma, e1 := strconv.ParseUint(maj, 10, 32)
			mi, e2 := strconv.ParseUint(min, 10, 32)
			if !ok || e1 != nil || e2 != nil {
				return ErrNoDM
			}
			os.MkdirAll("/dev/mapper", 0o755)
			err := unix.Mknod(DMControlPath, unix.S_IFCHR|0o600, int(unix.Mkdev(uint32(ma), uint32(mi))))
			if err != nil && !errors.Is(err, syscall.EEXIST) {
				return fmt.Errorf("%w: mknod: %v", ErrNoDM, err)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
