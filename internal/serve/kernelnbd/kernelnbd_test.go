package kernelnbd

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"mdtool/internal/serve/export"
	"mdtool/ioctl"
)

// TestAttachWithoutNBD: where the kernel has no NBD client (the CI host),
// Attach fails with ioctl.ErrNoNBD and leaves no server goroutine behind.
// The kernel side is tested in the VM (cmd's kernel NBD tests).
func TestAttachWithoutNBD(t *testing.T) {
	if Available() == nil {
		t.Skip("this kernel has an NBD client; the VM tests cover it")
	}
	if err := Available(); !errors.Is(err, ioctl.ErrNoNBD) {
		t.Fatalf("Available: %v, want ErrNoNBD", err)
	}
	be, err := export.NewMem(1<<20, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	d, err := Attach(be, -1, Options{Conns: 3})
	if err == nil {
		d.Detach()
		t.Fatal("Attach succeeded without an NBD client")
	}
	if !errors.Is(err, ioctl.ErrNoNBD) {
		t.Fatalf("Attach: %v, want ErrNoNBD", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after a failed Attach, %d before", n, before)
	}
	if Configured(1 << 20) {
		t.Fatal("a device that does not exist is configured")
	}
}
