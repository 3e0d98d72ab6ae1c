package cmd

import (
	"bytes"
	"log"
	"os"
	"testing"

	"mdtool/internal/daemon"
)

// TestEarlyLogHold: a background child holds the engine's log lines until
// its output has moved to the log file, even after the readiness
// notifier has cleared the ready-fd variable (the lines logged in that
// window reached the terminal of `mdtool create` once); a foreground run
// logs at once.
func TestEarlyLogHold(t *testing.T) {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)

	var fg earlyLog
	fg.printf("foreground %d", 1)
	if !bytes.Contains(buf.Bytes(), []byte("foreground 1")) {
		t.Fatalf("foreground line not logged at once: %q", buf.String())
	}

	buf.Reset()
	var bg earlyLog
	bg.hold()
	t.Setenv(daemon.ReadyFDEnv, "")
	os.Unsetenv(daemon.ReadyFDEnv) // as NewNotifier does before Ready
	bg.printf("recovery of %d member(s)", 1)
	if buf.Len() != 0 {
		t.Fatalf("a held line was logged before flush: %q", buf.String())
	}
	bg.flush()
	bg.printf("after %s", "flush")
	if got := buf.String(); !bytes.Contains([]byte(got), []byte("recovery of 1 member(s)")) || !bytes.Contains([]byte(got), []byte("after flush")) {
		t.Fatalf("after flush: %q", got)
	}
}
