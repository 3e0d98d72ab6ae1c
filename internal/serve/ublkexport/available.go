//go:build linux

package ublkexport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"mdtool/ioctl"
)

// Available reports whether ublk devices can be made here: nil when
// /dev/ublk-control exists. With load, a missing control device is first
// asked for with `modprobe ublk_drv` (then waited for, up to 5 s, as
// devtmpfs makes the node). The error says why not (ErrNoUblk, or the
// modprobe failure).
func Available(load bool) error {
	if _, err := os.Stat(ioctl.UblkControlPath); err == nil {
		return nil
	}
	if !load {
		return ErrNoUblk
	}
	out, err := exec.Command("modprobe", "ublk_drv").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: modprobe ublk_drv: %v %s", ErrNoUblk, err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat(ioctl.UblkControlPath)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return ErrNoUblk
		}
		time.Sleep(20 * time.Millisecond)
	}
}
