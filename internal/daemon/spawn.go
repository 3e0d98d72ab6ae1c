package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Background start: the command that the user ran (the parent) starts
// itself again (the child) with ReadyFDEnv set, in a new session, and
// waits on a pipe. The child assembles and starts the arrays, printing its
// messages on the stderr it shares with the parent; once its arrays serve
// (or it knows which failed) it moves its stdout and stderr to a log file
// and writes "READY <status>\n" on the pipe. The parent then exits with
// that status while the child goes on serving. A child that exits before
// saying READY failed: the parent exits with the child's exit status.

// ReadyFDEnv names the environment variable that gives the child the
// number of its readiness pipe.
const ReadyFDEnv = "MDTOOL_READY_FD"

// ChildExitError is a child that ended without becoming ready.
type ChildExitError struct{ Code int }

func (e *ChildExitError) Error() string {
	return fmt.Sprintf("daemon: background process exited with status %d before it was ready", e.Code)
}

// Spawn starts exe with args in the background as described above and
// returns the status the child reported with READY. stdout and stderr are
// given to the child until it is ready (normally the parent's own).
func Spawn(exe string, args []string, env []string, stdout, stderr *os.File) (int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 1, err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return 1, err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append([]string{}, env...), ReadyFDEnv+"=3")
	cmd.Stdin = devnull
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return 1, err
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	if rest, ok := strings.CutPrefix(line, "READY"); ok {
		code, _ := strconv.Atoi(strings.TrimSpace(rest))
		// The child lives on; reap nothing (it is in its own session and
		// is re-parented when we exit).
		cmd.Process.Release()
		return code, nil
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 1
		}
		return code, &ChildExitError{Code: code}
	}
	if err != nil {
		return 1, err
	}
	return 1, &ChildExitError{Code: 0}
}

// Notifier tells whoever waits for this process that it is ready: the
// parent of a background start (ReadyFDEnv) and systemd (NOTIFY_SOCKET,
// for Type=notify units).
type Notifier struct {
	ready   *os.File
	sdAddr  string
	logPath string
}

// NewNotifier reads ReadyFDEnv and NOTIFY_SOCKET and clears them from the
// environment (so that processes started later do not inherit them).
// logPath is where a background child moves its stdout and stderr.
func NewNotifier(logPath string) *Notifier {
	n := &Notifier{logPath: logPath}
	if v := os.Getenv(ReadyFDEnv); v != "" {
		if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
			n.ready = os.NewFile(uintptr(fd), "ready")
		}
		os.Unsetenv(ReadyFDEnv)
	}
	if v := os.Getenv("NOTIFY_SOCKET"); v != "" {
		n.sdAddr = v
		os.Unsetenv("NOTIFY_SOCKET")
	}
	return n
}

// Background reports whether a parent waits for this process.
func (n *Notifier) Background() bool { return n != nil && n.ready != nil }

// SetLog changes the log file a background child moves its output to.
func (n *Notifier) SetLog(path string) { n.logPath = path }

// Ready reports readiness with the exit status the parent should return.
// A background child first moves its stdout and stderr to the log file, so
// that nothing keeps the parent's terminal or pipe open.
func (n *Notifier) Ready(status int) error {
	if n == nil {
		return nil
	}
	var errs []error
	if n.ready != nil {
		if err := redirectOutput(n.logPath); err != nil {
			errs = append(errs, err)
		}
		if _, err := fmt.Fprintf(n.ready, "READY %d\n", status); err != nil {
			errs = append(errs, err)
		}
		n.ready.Close()
		n.ready = nil
	}
	if err := n.sdNotify(fmt.Sprintf("READY=1\nMAINPID=%d\nSTATUS=serving", os.Getpid())); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stopping tells systemd that the service is stopping.
func (n *Notifier) Stopping() error {
	if n == nil {
		return nil
	}
	return n.sdNotify("STOPPING=1")
}

// Status sends a free-form status line to systemd.
func (n *Notifier) Status(s string) error {
	if n == nil {
		return nil
	}
	return n.sdNotify("STATUS=" + s)
}

// sdNotify sends one datagram to $NOTIFY_SOCKET (sd_notify(3)); an address
// starting with '@' is in the abstract namespace.
func (n *Notifier) sdNotify(msg string) error {
	if n.sdAddr == "" {
		return nil
	}
	addr := n.sdAddr
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = io.WriteString(c, msg)
	return err
}

// redirectOutput points file descriptors 1 and 2 at the log file (appended)
// or at /dev/null when path is "". The log is opened as openRunFile does:
// a symbolic link (or anything but a regular file) there is not followed;
// the output goes to /dev/null then, and the error is returned.
func redirectOutput(path string) error {
	var f *os.File
	var err, logErr error
	if path != "" {
		f, logErr = openRunFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if path == "" || logErr != nil {
		f, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
	}
	defer f.Close()
	if err := unix.Dup2(int(f.Fd()), 1); err != nil {
		return err
	}
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		return err
	}
	return logErr
}
