package nbd_test

import (
	"fmt"
	"os"
	"path/filepath"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/nbd"
)

// A Backend served on a unix socket; clients connect with
// nbd+unix:///md0?socket=PATH.
func ExampleServer() {
	mem, err := export.NewMem(64<<20, 512, 4096, 1<<20)
	if err != nil {
		panic(err)
	}
	srv, err := nbd.NewServer(nbd.Config{Exports: []nbd.Export{{Name: "md0", Description: "test", Backend: mem}}})
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "nbd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	l, err := srv.ListenUnix(filepath.Join(dir, "md0.sock"))
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Addr().Network())
	// Close waits for requests in flight and flushes the Backend.
	if err := srv.Close(); err != nil {
		panic(err)
	}
	// Output: unix
}
