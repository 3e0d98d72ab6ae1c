//go:build linux

package ioctl

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestOpenMemberForkedCopies: while other goroutines fork and exec
// children (each child holds copies of this process's descriptors until
// its exec completes), an image file opened exclusively and closed again
// is never reported busy by the next exclusive open. Before flockMember
// waited for such copies, about one open in six failed here.
func TestOpenMemberForkedCopies(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var forks [2]int
	for i := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := exec.Command("/bin/true").Run(); err != nil {
					t.Errorf("/bin/true: %v", err)
					return
				}
				forks[i]++
			}
		}()
	}
	busy := 0
	for i := 0; i < 20000 && busy < 10; i++ {
		f, err := OpenMember(p, OpenOptions{Write: true, Exclusive: true})
		var be *BusyError
		switch {
		case errors.As(err, &be):
			busy++
		case err != nil:
			t.Fatal(err)
		default:
			f.Close()
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("children run meanwhile: %d", forks[0]+forks[1])
	if busy > 0 {
		t.Errorf("%d exclusive opens of a closed image file said busy (a forked child's descriptor copy)", busy)
	}
}

// TestOpenMemberLockedElsewhere: a lock another process holds (flock(1))
// is busy, as is one another descriptor of this process holds, while a
// forked copy is not (TestOpenMemberForkedCopies).
func TestOpenMemberLockedElsewhere(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(p, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	// One process holds the lock: the shell's descriptor 9, then sleep's.
	cmd := exec.Command("sh", "-c", `exec 9>"$1" && flock -x 9 && echo locked && exec sleep 600`, "sh", p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("flock(1): %q, %v", line, err)
	}
	f, err := OpenMember(p, OpenOptions{Write: true, Exclusive: true})
	var be *BusyError
	if !errors.As(err, &be) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("exclusive open of a file flock(1) holds: %v, want *BusyError", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	f, err = OpenMember(p, OpenOptions{Write: true, Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive open after flock(1) ended: %v", err)
	}
	g, err := OpenMember(p, OpenOptions{Exclusive: true})
	if !errors.As(err, &be) {
		if g != nil {
			g.Close()
		}
		t.Errorf("second exclusive open in this process: %v, want *BusyError", err)
	}
	f.Close()
}
