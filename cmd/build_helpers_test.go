package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
)

// serveBuild runs `build --foreground` in a goroutine and waits until the
// array answers on its control socket and build said it started.
func serveBuild(t *testing.T, runDir, md string, args ...string) *served {
	t.Helper()
	env, _, errb := daemonEnv()
	full := append([]string{"build", "--foreground", "--run-dir", runDir, md}, args...)
	s := &served{t: t, runDir: runDir, md: md, done: make(chan int, 1), stderr: errb}
	s.name, _ = daemon.ArrayName(md)
	go func() { s.done <- Main(full, env) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case code := <-s.done:
			t.Fatalf("build %s %v: exit %d: %s", md, args, code, errb.String())
		default:
		}
		if cl, err := daemon.Dial(runDir, s.name); err == nil {
			_, err := cl.Call(context.Background(), daemon.Request{Op: daemon.OpPing})
			cl.Close()
			if err == nil && strings.Contains(errb.String(), "array "+md+" built and started.") {
				t.Cleanup(func() { s.stopIfRunning() })
				return s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("build %s did not become ready: %s", md, errb.String())
	return nil
}
