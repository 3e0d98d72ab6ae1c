//go:build linux

package ioctl

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ring reads an eventfd: submit, wait, reap, with the user data and
// the result of the read; a full submission queue is an error, not an
// overwrite; 128-byte SQEs give an 80-byte command area.
func TestRingReadEventfd(t *testing.T) {
	r, err := NewRing(2, 0)
	if err != nil {
		t.Fatalf("NewRing: %v (io_uring is required: kernel.io_uring_disabled must be 0)", err)
	}
	defer r.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for round := uint64(1); round <= 3; round++ {
		if err := r.PrepRead(efd, unsafe.Pointer(&mem[0]), 8, 0, 100+round); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(efd, (*[8]byte)(unsafe.Pointer(&round))[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Submit(1); err != nil {
			t.Fatal(err)
		}
		c, ok := r.PeekCQE()
		if !ok {
			t.Fatalf("round %d: no completion after waiting for one", round)
		}
		r.SeenCQE()
		if c.UserData != 100+round || c.Res != 8 || getU64(mem) != round {
			t.Fatalf("round %d: cqe %+v, read %d", round, c, getU64(mem))
		}
		if _, ok := r.PeekCQE(); ok {
			t.Fatalf("round %d: a second completion", round)
		}
	}
	// two entries (rounded up to a power of two): the third is refused
	for i := 0; i < 2; i++ {
		if err := r.PrepRead(efd, unsafe.Pointer(&mem[0]), 8, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.PrepRead(efd, unsafe.Pointer(&mem[0]), 8, 0, 1); !errors.Is(err, ErrRingFull) {
		t.Fatalf("third SQE in a 2-entry ring: %v", err)
	}

	r128, err := NewRing(4, RingSQE128)
	if err != nil {
		t.Fatal(err)
	}
	defer r128.Close()
	cmd, err := r128.PrepURingCmd(efd, 7, 9)
	if err != nil || len(cmd) != 80 {
		t.Fatalf("SQE128 command area %d bytes, %v", len(cmd), err)
	}
	if cmd, _ := r.PrepURingCmd(efd, 7, 9); cmd != nil {
		t.Fatalf("a full ring gave a command area")
	}
}

// The ublk structures have the kernel's sizes and the command numbers
// its ioctl encoding.
func TestUblkABI(t *testing.T) {
	if s := unsafe.Sizeof(UblkDevInfo{}); s != 64 {
		t.Errorf("ublksrv_ctrl_dev_info %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(UblkParamBasic{}); s != 32 {
		t.Errorf("ublk_param_basic %d bytes, want 32", s)
	}
	if s := unsafe.Sizeof(UblkParamDiscard{}); s != 20 {
		t.Errorf("ublk_param_discard %d bytes, want 20", s)
	}
	var p UblkParams
	if o := unsafe.Offsetof(p.Basic); o != 8 {
		t.Errorf("basic at %d, want 8", o)
	}
	if o := unsafe.Offsetof(p.Discard); o != 40 {
		t.Errorf("discard at %d, want 40", o)
	}
	if o := unsafe.Offsetof(p.Devt); o != 60 {
		t.Errorf("devt at %d, want 60", o)
	}
	if s := unsafe.Sizeof(p); s != 112 {
		t.Errorf("ublk_params %d bytes, want 112", s)
	}
	if s := unsafe.Sizeof(UblkIODesc{}); s != ublkIODescSize {
		t.Errorf("ublksrv_io_desc %d bytes", s)
	}
	// UBLK_U_CMD_GET_FEATURES = _IOR('u', 0x13, struct ublksrv_ctrl_cmd)
	if op := ioc(iocRead, ublkCmdGetFeatures, ublkCtrlCmdSize); op != 0x80207513 {
		t.Errorf("GET_FEATURES op %#x, want 0x80207513", op)
	}
	// UBLK_U_IO_COMMIT_AND_FETCH_REQ = _IOWR('u', 0x21, struct ublksrv_io_cmd)
	if op := ioc(iocReadWrite, ublkIOCommitAndFetch, ublkIOCmdSize); op != 0xc0107521 {
		t.Errorf("COMMIT_AND_FETCH_REQ op %#x, want 0xc0107521", op)
	}
}

// A ring with deferred task work still completes a read when its thread
// waits (the queue rings' flags).
func TestRingDeferTaskrun(t *testing.T) {
	runtime.LockOSThread() // a single-issuer ring is its creating thread's
	defer runtime.UnlockOSThread()
	r, err := NewRing(4, RingCoopTaskrun|RingSingleIssuer|RingDeferTaskrun)
	if err != nil {
		t.Fatalf("NewRing: %v", err)
	}
	defer r.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := r.PrepRead(efd, unsafe.Pointer(&mem[0]), 8, 0, 42); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	one := uint64(7)
	if _, err := unix.Write(efd, (*[8]byte)(unsafe.Pointer(&one))[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(1); err != nil {
		t.Fatal(err)
	}
	c, ok := r.PeekCQE()
	if !ok || c.UserData != 42 || c.Res != 8 || getU64(mem) != 7 {
		t.Fatalf("cqe %+v ok %v read %d", c, ok, getU64(mem))
	}
}
