//go:build linux

package dmshim

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mdtool/ioctl"
)

// Table is the device-mapper table of the shim over the door device
// major:minor: "striped" with S stripes of chunk sectors, stripe k at
// k·W, then "linear" for the tail.
func (g Geometry) Table(major, minor uint32) []ioctl.DMTarget {
	dev := fmt.Sprintf("%d:%d", major, minor)
	w := g.Width() >> 9
	var p strings.Builder
	fmt.Fprintf(&p, "%d %d", g.Stripes, g.Chunk>>9)
	for k := int64(0); k < g.Stripes; k++ {
		fmt.Fprintf(&p, " %s %d", dev, k*w)
	}
	t := []ioctl.DMTarget{{Start: 0, Length: uint64(w * g.Stripes), Type: "striped", Params: p.String()}}
	if tail := (g.Size - g.Striped()) >> 9; tail > 0 {
		t = append(t, ioctl.DMTarget{Start: uint64(w * g.Stripes), Length: uint64(tail), Type: "linear",
			Params: dev + " " + strconv.FormatInt(w*g.Stripes, 10)})
	}
	return t
}

// Device is the shim's device-mapper device.
type Device struct {
	Name string
	Info ioctl.DMInfo
}

// Path is the device's node, /dev/dm-N.
func (d *Device) Path() string { return d.Info.Path() }

// Available says whether device-mapper can be used (ioctl.DMAvailable).
func Available() error { return ioctl.DMAvailable() }

func devOf(path string) (major, minor uint32, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return 0, 0, fmt.Errorf("dmshim: %s is not a block device", path)
	}
	return ioctl.Major(st.Rdev), ioctl.Minor(st.Rdev), nil
}

// Ensure makes (or takes over) device name mapping the door device lower
// by g: an existing device of that name (left by a killed daemon, with a
// file system on it perhaps) keeps serving; its table is replaced when it
// maps another device (the door was attached anew). reused says that the
// device existed.
func Ensure(name, uuid, lower string, g Geometry) (d *Device, reused bool, err error) {
	if !g.Valid() {
		return nil, false, fmt.Errorf("dmshim: geometry %+v cannot be mapped", g)
	}
	major, minor, err := devOf(lower)
	if err != nil {
		return nil, false, err
	}
	table := g.Table(major, minor)
	inf, err := ioctl.DMStatus(name)
	switch {
	case err == nil:
		cur, terr := ioctl.DMTable(name)
		if terr != nil || !reflect.DeepEqual(cur, table) {
			if err := ioctl.DMReload(name, table, true); err != nil {
				return nil, false, err
			}
		}
		if inf, err = ioctl.DMStatus(name); err != nil {
			return nil, false, err
		}
		reused = true
	case errors.Is(err, syscall.ENXIO):
		if inf, err = ioctl.DMCreate(name, uuid, table); err != nil {
			return nil, false, err
		}
	default:
		return nil, false, fmt.Errorf("device-mapper: status of %s: %w", name, err)
	}
	d = &Device{Name: name, Info: inf}
	// devtmpfs makes /dev/dm-N asynchronously
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(d.Path()); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d, reused, nil
}

// Remove removes the device; EBUSY (errors.Is) while it is open. With
// force an open device gets the "error" target (its users see I/O errors,
// and the door below is no longer used) and goes when its last user
// closes it.
func (d *Device) Remove(force bool) error {
	return Remove(d.Name, force)
}

// Remove removes device name (see Device.Remove); no such device is no
// error.
func Remove(name string, force bool) error {
	err := ioctl.DMRemove(name)
	if err == nil || errors.Is(err, syscall.ENXIO) || !force || !errors.Is(err, syscall.EBUSY) {
		if errors.Is(err, syscall.ENXIO) {
			err = nil
		}
		return err
	}
	tab, terr := ioctl.DMTable(name)
	if terr != nil {
		return err
	}
	var size uint64
	for _, t := range tab {
		size = max(size, t.Start+t.Length)
	}
	if rerr := ioctl.DMReload(name, []ioctl.DMTarget{{Start: 0, Length: size, Type: "error"}}, true); rerr != nil {
		return errors.Join(err, rerr)
	}
	return ioctl.DMRemoveDeferred(name)
}
