package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestArrayName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/dev/md/data", "data", true},
		{"/dev/md0", "md0", true},
		{"/dev/md/0", "md0", true},
		{"md0", "md0", true},
		{"0", "md0", true},
		{"/dev/md127", "md127", true},
		{"data", "data", true},
		{"/dev/md/home_0", "home_0", true},
		{"/dev/md/a/b", "", false},
		{"", "", false},
		{"/dev/md/", "", false},
		{"/dev/md/..", "", false},
		// Names are data: unsafe bytes are escaped, never a separator.
		{"/dev/md/x\nPROGRAM evil", `x\nPROGRAM evil`, true},
		{"/dev/md/\x1b[31mred", `\x1b[31mred`, true},
		{"/dev/md/a\x00b", `a\x00b`, true},
		{"/dev/md/a\\b", `a\\b`, true},
		{"/dev/md/\xff", `\xff`, true},
		{"/dev/md/x\n/../y", "", false},
	} {
		got, err := ArrayName(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ArrayName(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err == nil && (strings.ContainsAny(got, "/\n\x00\x1b") || got == "..") {
			t.Errorf("ArrayName(%q) = %q: not a plain file name", tc.in, got)
		}
		if err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("ArrayName(%q): error %v is not ErrBadName", tc.in, err)
		}
	}
}

func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	p := PathsFor(dir, "a")
	if Held(p) {
		t.Fatal("held before anyone locked")
	}
	l, err := AcquireLock(p)
	if err != nil {
		t.Fatal(err)
	}
	if !Held(p) {
		t.Error("not held while locked")
	}
	if _, err := AcquireLock(p); !errors.Is(err, ErrRunning) {
		t.Errorf("second lock: %v, want ErrRunning", err)
	}
	if names, _ := Names(dir); len(names) != 1 || names[0] != "a" {
		t.Errorf("Names = %v", names)
	}
	l.Release()
	if Held(p) {
		t.Error("held after release")
	}
	if names, _ := Names(dir); len(names) != 0 {
		t.Errorf("Names after release = %v", names)
	}
	// A lock file left by a dead process is taken over.
	l, err = AcquireLock(p)
	if err != nil {
		t.Fatalf("re-lock: %v", err)
	}
	l.Release()
}

func TestListenUnixStaleAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sock")
	// A live listener: refused.
	l1, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v", fi.Mode(), err)
	}
	if _, err := ListenUnix(path); err == nil {
		t.Error("a second listener on a live socket succeeded")
	}
	// Close removes the file.
	l1.Close()
	if _, err := os.Lstat(path); err == nil {
		t.Error("socket file left after Close")
	}
	// A stale socket file (bound, nobody listening) is replaced.
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal("the stale socket file vanished")
	}
	l2, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	// A regular file is not removed.
	os.WriteFile(path, []byte("data"), 0o600)
	if _, err := ListenUnix(path); err == nil {
		t.Error("a regular file was replaced")
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Error("the regular file changed")
	}
}

type fakeHandler struct {
	mu      sync.Mutex
	stopped bool
	ops     []string
	busy    bool
}

func (h *fakeHandler) Status() (*Status, error) {
	return &Status{Name: "x", Device: "/dev/md/x", RaidDisks: 3}, nil
}

func (h *fakeHandler) Stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy {
		return Errorf(CodeBusy, "in use")
	}
	h.stopped = true
	return nil
}

func (h *fakeHandler) Manage(req Request) (*Response, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, req.Op+" "+req.Device)
	switch req.Device {
	case "/nope":
		return nil, Errorf(CodeNotMember, "%s is not a member", req.Device)
	case "/fs":
		return nil, &OpError{Code: CodeHoldsData, Msg: "holds data", Resp: &Response{Signatures: []string{"ext4 filesystem"}}}
	}
	if req.Op == OpAdd {
		return &Response{Result: ResultReAdded, Number: 4}, nil
	}
	return nil, nil
}

func TestControlProtocol(t *testing.T) {
	dir := t.TempDir()
	h := &fakeHandler{busy: true}
	srv, err := NewServer(PathsFor(dir, "x").Control(), h)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := Dial(dir, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Call(ctx, Request{Op: OpPing}); err != nil {
		t.Errorf("ping: %v", err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Device != "/dev/md/x" || st.RaidDisks != 3 {
		t.Errorf("status: %+v %v", st, err)
	}
	var oe *OpError
	if _, err := c.Call(ctx, Request{Op: OpFail, Device: "/nope"}); !errors.As(err, &oe) || oe.Code != CodeNotMember {
		t.Errorf("fail of a non-member: %v", err)
	}
	if r, err := c.Call(ctx, Request{Op: OpAdd, Device: "/fs"}); !errors.As(err, &oe) || oe.Code != CodeHoldsData ||
		r == nil || len(r.Signatures) != 1 || oe.Resp == nil || oe.Resp.Signatures[0] != "ext4 filesystem" {
		t.Errorf("add of a device holding data: %+v %v", r, err)
	}
	if r, err := c.Call(ctx, Request{Op: OpAdd, Device: "/d"}); err != nil || !r.OK || r.Result != ResultReAdded || r.Number != 4 {
		t.Errorf("add: %+v %v", r, err)
	}
	if _, err := c.Call(ctx, Request{Op: OpAction}); !errors.As(err, &oe) || oe.Code != CodeInvalid {
		t.Errorf("action without an action: %v", err)
	}
	if r, err := c.Call(ctx, Request{Op: OpAction, Action: "check"}); err != nil || !r.OK {
		t.Errorf("action: %+v %v", r, err)
	}
	if _, err := c.Call(ctx, Request{Op: OpFail}); !errors.As(err, &oe) || oe.Code != CodeInvalid {
		t.Errorf("fail without a device: %v", err)
	}
	if _, err := c.Call(ctx, Request{Op: "explode"}); !errors.As(err, &oe) || oe.Code != CodeInvalid {
		t.Errorf("unknown op: %v", err)
	}
	if _, err := c.Call(ctx, Request{Op: OpStop}); !errors.As(err, &oe) || oe.Code != CodeBusy {
		t.Errorf("busy stop: %v", err)
	}
	select {
	case <-srv.Stopped():
		t.Error("Stopped after a refused stop")
	default:
	}
	// Garbage on the line gets an error answer, the connection survives.
	raw, err := net.Dial("unix", PathsFor(dir, "x").Control())
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("not json\n"))
	buf := make([]byte, 512)
	n, _ := raw.Read(buf)
	if !strings.Contains(string(buf[:n]), `"code":"invalid"`) {
		t.Errorf("answer to garbage: %s", buf[:n])
	}
	raw.Close()
	h.mu.Lock()
	h.busy = false
	h.mu.Unlock()
	if _, err := c.Call(ctx, Request{Op: OpStop}); err != nil {
		t.Errorf("stop: %v", err)
	}
	select {
	case <-srv.Stopped():
	case <-time.After(5 * time.Second):
		t.Error("Stopped not signalled")
	}
	if _, err := Dial(t.TempDir(), "none"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("dial of nothing: %v", err)
	}
}

func TestNotifier(t *testing.T) {
	dir := t.TempDir()
	addr := filepath.Join(dir, "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("NOTIFY_SOCKET", addr)
	n := NewNotifier("")
	if os.Getenv("NOTIFY_SOCKET") != "" {
		t.Error("NOTIFY_SOCKET not cleared")
	}
	if n.Background() {
		t.Error("background without a ready fd")
	}
	if err := n.Ready(0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, _, err := c.ReadFromUnix(buf)
	if err != nil || !strings.HasPrefix(string(buf[:k]), "READY=1\nMAINPID=") {
		t.Errorf("notification %q %v", buf[:k], err)
	}
	n.Stopping()
	k, _, err = c.ReadFromUnix(buf)
	if err != nil || string(buf[:k]) != "STOPPING=1" {
		t.Errorf("notification %q %v", buf[:k], err)
	}
}

// TestSpawn runs this test binary as the child: the helper below plays a
// daemon that reports READY with a status, or fails before.
func TestSpawn(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "child.log")
	for _, tc := range []struct {
		mode string
		code int
		err  bool
	}{
		{"ready3", 3, false},
		{"fail7", 7, true},
	} {
		env := append(os.Environ(), "DAEMON_TEST_CHILD="+tc.mode, "DAEMON_TEST_LOG="+log)
		code, err := Spawn(exe, []string{"-test.run=^$"}, env, os.Stdout, os.Stderr)
		var ce *ChildExitError
		if code != tc.code || (err != nil) != tc.err || (tc.err && !errors.As(err, &ce)) {
			t.Errorf("%s: code %d err %v", tc.mode, code, err)
		}
	}
	// The ready child lives on, detached, with its output in the log.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "after ready") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Errorf("the child did not log after READY: %q", b)
}

// TestMain turns the test binary into TestSpawn's child when asked to.
func TestMain(m *testing.M) {
	if mode := os.Getenv("DAEMON_TEST_CHILD"); mode != "" {
		spawnChild(mode)
	}
	os.Exit(m.Run())
}

func spawnChild(mode string) {
	n := NewNotifier(os.Getenv("DAEMON_TEST_LOG"))
	if !n.Background() {
		os.Exit(90)
	}
	switch mode {
	case "ready3":
		n.Ready(3)
		os.Stderr.WriteString("after ready\n")
		os.Exit(0)
	case "fail7":
		os.Exit(7)
	}
	os.Exit(91)
}
