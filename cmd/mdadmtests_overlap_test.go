package cmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"mdtool/internal/mdvm"
)

// hostDoneFile is the flag, in the share, that the host side of a
// mdadm-test table is over: the guest's kernel checks of mdtool's images
// wait for it (mdadmTestVMScript).
const hostDoneFile = "host-done"

// hostDoneWait is the guest's wait for hostDoneFile (bounded: a host side
// that never ends fails the kernel checks, not the whole run).
const hostDoneWait = "i=0; while [ ! -e /share/" + hostDoneFile + " ] && [ $i -lt 3000 ]; do sleep 1; i=$((i+1)); done\n" +
	"[ -e /share/" + hostDoneFile + " ] || echo HOST-DONE-TIMEOUT\n"

// execBeside runs the guest of r while host runs the mdtool side of the
// table on the host: mdadm's side in the guest needs nothing from the
// host, and only the kernel checks at the end (after hostDoneWait) read
// the images mdtool left. The two sides overlap instead of following one
// another, which takes the host side's minutes off CI's critical path.
// It returns the guest's output and fails the test as mdvm.MustExec does.
func execBeside(t *testing.T, share string, r mdvm.Run, host func()) []byte {
	t.Helper()
	flag := filepath.Join(share, hostDoneFile)
	os.Remove(flag)
	type result struct {
		res mdvm.Result
		err error
	}
	ch := make(chan result, 1)
	t0 := time.Now()
	go func() {
		res, err := r.Exec(context.Background())
		ch <- result{res, err}
	}()
	waited := false
	defer func() {
		if !waited { // host failed the test (t.Fatal): let the guest end before the share goes
			os.WriteFile(flag, nil, 0o644)
			<-ch
		}
	}()
	host()
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rr := <-ch
	waited = true
	t.Logf("mdvm: guest ran %.1fs (%.1fs with the wait for a guest slot), beside the host side", rr.res.Ran.Seconds(), time.Since(t0).Seconds())
	if rr.err != nil {
		t.Fatalf("mdvm: %v\noutput:\n%s", rr.err, rr.res.Output)
	}
	if rr.res.Code != 0 {
		t.Fatalf("mdvm guest script exited %d; output:\n%s", rr.res.Code, rr.res.Output)
	}
	return rr.res.Output
}
