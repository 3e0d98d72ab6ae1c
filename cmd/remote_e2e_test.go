package cmd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mdtool/engine"
	"mdtool/internal/daemon"
	fiobench "mdtool/internal/nbdbench"
	"mdtool/internal/testkit/nbdkit"
)

// remoteMember is one member on "another machine": an image file served by
// nbdkit in its own network namespace.
type remoteMember struct {
	img  string
	host *nbdkit.Host
	srv  *nbdkit.Server
	ctl  string // the pause filter's control socket, if any
}

func (m *remoteMember) uri() string { return m.srv.URI("nbd") }

// pause stops the server from answering (nbdkit's pause filter).
func (m *remoteMember) pause(t *testing.T, cmd byte) {
	t.Helper()
	c, err := net.Dial("unix", m.ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{cmd}); err != nil {
		t.Fatal(err)
	}
	// A pause is acknowledged once the requests already received are done.
	var ack [1]byte
	if cmd == 'r' {
		c.Read(ack[:])
	}
}

// remoteMembers makes n image files of size bytes, each served by nbdkit in
// its own network namespace.
func remoteMembers(t *testing.T, dir, name string, n int, size int64) []*remoteMember {
	t.Helper()
	var ms []*remoteMember
	for i := 0; i < n; i++ {
		m := &remoteMember{img: sparse(t, dir, fmt.Sprintf("%s-r%d.img", name, i), size), host: nbdkit.NewHost(t)}
		m.ctl = filepath.Join(dir, fmt.Sprintf("%s-r%d.ctl", name, i))
		m.serve(t, 10809, nil)
		ms = append(ms, m)
	}
	return ms
}

// serve (re)starts the member's server on port with the pause filter (it
// passes requests through until paused) and extra: more filters before
// the plugin, parameters after it.
func (m *remoteMember) serve(t *testing.T, port int, extra []string) {
	t.Helper()
	if m.srv != nil {
		m.srv.Stop()
	}
	opts, params := []string{"--filter=pause"}, []string{"pause-control=" + m.ctl}
	for _, a := range extra {
		if strings.HasPrefix(a, "--") {
			opts = append(opts, a)
		} else {
			params = append(params, a)
		}
	}
	m.srv = nbdkit.StartIn(t, m.host, port, append(append(opts, "file", m.img), params...)...)
}

func uris(ms []*remoteMember) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.uri())
	}
	return out
}

// runFioVerify runs fio verify through the array's NBD export in the
// background; the returned function waits for it and fails the test on any
// error fio reports, or on a request longer than the remote timeout + gap
// (the gap between two hosts' losses, which the test makes at the same
// moment: a request that waits for both can be held until the second
// one's deadline).
func runFioVerify(t *testing.T, s *served, per int64) func(gap time.Duration) {
	t.Helper()
	j := fiobench.Job{Name: "randwrite-verify", RW: "randwrite", BS: "4k", IODepth: 32, NumJobs: 4, Size: per,
		Extra: []string{"--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0"}}
	type result struct {
		res fiobench.Result
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		res, out, err := fiobench.Run(ctx, s.nbdURI(), j)
		done <- result{res, out, err}
	}()
	return func(gap time.Duration) {
		t.Helper()
		r := <-done
		if r.err != nil {
			t.Fatalf("fio: %v\n%s", r.err, r.out)
		}
		if strings.Contains(r.out, "verify:") || strings.Contains(r.out, "bad magic") || fioErrRe.MatchString(r.out) {
			t.Errorf("fio reports errors:\n%s", r.out)
		}
		if r.res.WriteBytes == 0 || r.res.ReadBytes == 0 {
			t.Errorf("fio wrote %d and verified %d bytes", r.res.WriteBytes, r.res.ReadBytes)
		}
		// --remote-timeout is the bound itself: the members' deadline
		// leaves engine.RemoteAllowance of it for the probe and the
		// failure record.
		t.Logf("fio: longest request %v (remote timeout %v, member deadline %v, gap between the losses %v)",
			r.res.MaxLatency, remoteTimeout, engine.MemberDeadline(remoteTimeout), gap)
		if r.res.MaxLatency > remoteTimeout+gap {
			t.Errorf("fio: a request took %v: the array stalled beyond the %v remote timeout + %v between the losses",
				r.res.MaxLatency, remoteTimeout, gap)
		}
	}
}

// hostLoss is how a member's host goes away.
type hostLoss struct {
	member int
	how    string // kill, link, pause, slow (slowed from the start: nothing to do)
}

// loseHosts makes the hosts of lost go away, each in its own goroutine,
// released together. It returns when the first loss began, the gap between
// the losses — at most the time from the first one's start to the last
// one's end (0 for one host) — and how long after the first start the last
// one had happened.
func loseHosts(t *testing.T, ms []*remoteMember, lost []hostLoss) (at time.Time, gap, lostBy time.Duration) {
	t.Helper()
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		start, end []time.Time
		errs       []error
	)
	release := make(chan struct{})
	for _, l := range lost {
		wg.Add(1)
		go func(m *remoteMember, how string) {
			defer wg.Done()
			<-release
			s := time.Now()
			var err error
			switch how {
			case "kill":
				m.srv.Stop()
			case "link":
				err = m.host.SetLink(false)
			case "pause":
				var c net.Conn
				if c, err = net.Dial("unix", m.ctl); err == nil {
					_, err = c.Write([]byte{'p'})
					c.Close()
				}
			}
			e := time.Now()
			mu.Lock()
			defer mu.Unlock()
			start, end = append(start, s), append(end, e)
			if err != nil {
				errs = append(errs, err)
			}
		}(ms[l.member], l.how)
	}
	close(release)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("losing hosts %v: %v", lost, errs)
	}
	at, last := start[0], end[0]
	for i := range start {
		if start[i].Before(at) {
			at = start[i]
		}
		if end[i].After(last) {
			last = end[i]
		}
	}
	if len(lost) > 1 {
		gap = last.Sub(at)
	}
	return at, gap, last.Sub(at)
}

// remoteTimeout is the e2e tests' --remote-timeout: generous, so that a
// healthy member of this loaded machine never fails (a flush under fio
// load took over 2 s).
const remoteTimeout = 15 * time.Second

// waitWriting waits until the array has taken a write (md marks it active,
// not clean): fio is running.
func waitWriting(t *testing.T, runDir, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if st, err := queryStatus(runDir, name); err == nil && !st.Clean {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the array took no write")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFaulty waits until the daemon reports the member at uri faulty.
func waitFaulty(t *testing.T, runDir, name string, uri string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		st, err := queryStatus(runDir, name)
		if err == nil {
			for _, m := range st.Members {
				if m.Path == uri && m.State == "faulty" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became faulty: %+v", uri, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRemoteMembers: arrays whose members are nbdkit exports in network
// namespaces, created, examined and assembled by URI. During fio verify a
// host goes away: its server is killed, its link is cut, it stops
// answering (pause filter) or answers too slowly (delay filter). The array
// fails that member within --remote-timeout and goes on; fio sees no error.
// When the host is back, --re-add rebuilds only the chunks the bitmap
// marked dirty, check finds no mismatch, and the kernel assembles the
// images with check 0 and the same data.
func TestRemoteMembers(t *testing.T) {
	const size = 64 << 20
	type loss = hostLoss
	cases := []struct {
		name  string
		n     int
		opts  []string
		extra map[int][]string
		lost  []loss
	}{
		{"raid1", 2, []string{"-l1", "-n2"}, nil, []loss{{1, "kill"}}},
		{"raid6", 6, []string{"-l6", "-n6", "-c", "64"}, nil, []loss{{1, "link"}, {4, "pause"}}},
		// Slowed from the start: it fails at the first write to it (the
		// bitmap daemon's), so every chunk is still dirty then.
		{"raid1slow", 2, []string{"-l1", "-n2"}, map[int][]string{0: {"--filter=delay", "wdelay=3600"}}, []loss{{0, "slow"}}},
	}
	top := memDir(t)
	var toKernel []kernelCheck
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			runDir := filepath.Join(dir, "run")
			md := "/dev/md/" + c.name
			ms := remoteMembers(t, top, c.name, c.n, size)
			args := append([]string{"create", md, "--run", "--homehost=testhost", "--start=false", "--assume-clean",
				"--bitmap=internal", "--bitmap-chunk=1M"}, c.opts...)
			if code, _, errs := mdtool(t, append(args, uris(ms)...)...); code != 0 {
				t.Fatalf("create by URI: exit %d: %s", code, errs)
			}
			// examine by URI reads what create wrote on the remote export.
			code, out, errs := mdtool(t, "examine", ms[0].uri())
			if code != 0 || !strings.Contains(out, "Raid Devices : "+fmt.Sprint(c.n)) || !strings.HasPrefix(out, ms[0].uri()+":\n") {
				t.Fatalf("examine %s: exit %d:\n%s%s", ms[0].uri(), code, out, errs)
			}
			// Filters that hold requests start after create (on another
			// port: the superblocks do not record where a member was).
			for i, x := range c.extra {
				ms[i].serve(t, 10810, x)
			}
			s := serve(t, runDir, md, append([]string{"--remote-timeout=" + remoteTimeout.String()}, uris(ms)...)...)
			// create leaves every bitmap bit set; md (and the engine)
			// clears them a few bitmap-daemon periods after start.
			// A member slowed from the start fails at its first write,
			// before that happens.
			slow := c.extra != nil
			if !slow {
				waitBitmapClean(t, ms[0].uri())
			}
			per := int64(size/4) / 4 / (1 << 20) * (1 << 20) // fio covers a quarter: the rest stays clean
			if c.n > 2 {
				per = int64(size/4) * int64(c.n-2) / 4 / (1 << 20) * (1 << 20)
			}
			fioStart := time.Now()
			wait := runFioVerify(t, s, per)
			waitWriting(t, runDir, s.name)
			lossAt, gap, lostBy := loseHosts(t, ms, c.lost)
			for _, l := range c.lost {
				waitFaulty(t, runDir, s.name, ms[l.member].uri())
			}
			faultyAt := time.Since(lossAt)
			t.Logf("fio started %v before the loss; members lost within %v, faulty %v after the loss began",
				lossAt.Sub(fioStart).Round(time.Millisecond), lostBy.Round(time.Millisecond), faultyAt.Round(time.Millisecond))
			if faultyAt > lostBy+remoteTimeout {
				t.Errorf("members faulty %v after the loss began (all lost within %v): later than the %v remote timeout",
					faultyAt, lostBy, remoteTimeout)
			}
			wait(gap)
			_, out, _ = mdtool(t, "detail", "--run-dir", runDir, md)
			for _, l := range c.lost {
				if !strings.Contains(out, "faulty   "+ms[l.member].uri()+"\n") {
					t.Errorf("detail does not name %s faulty:\n%s", ms[l.member].uri(), out)
				}
			}
			if !strings.Contains(out, "degraded") {
				t.Errorf("detail: not degraded:\n%s", out)
			}
			// detail --json: every member's connection, by URI.
			devsJ, _ := detailJSONOf(t, runDir, md)["devices"].([]any)
			seen := 0
			for _, d := range devsJ {
				dm := d.(map[string]any)
				if dm["path"] == nil {
					continue // a removed slot
				}
				r, _ := dm["remote"].(map[string]any)
				if r == nil {
					t.Errorf("detail --json: %v has no remote object", dm["path"])
					continue
				}
				seen++
				lost := false
				for _, l := range c.lost {
					lost = lost || dm["path"] == ms[l.member].uri()
				}
				if want := map[bool]string{true: "lost", false: "connected"}[lost]; r["state"] != want {
					t.Errorf("detail --json: %v: remote %v, want state %s", dm["path"], r, want)
				}
				if !lost && r["latency_us"].(float64) <= 0 {
					t.Errorf("detail --json: %v: no latency: %v", dm["path"], r)
				}
			}
			if seen != c.n {
				t.Errorf("detail --json: %d remote members, want %d", seen, c.n)
			}
			// The host comes back.
			for _, l := range c.lost {
				m := ms[l.member]
				switch l.how {
				case "kill":
					m.srv.Restart(t)
				case "link":
					m.host.LinkUp(t)
				case "pause":
					// The host comes back restarted: resuming the paused
					// server would let it apply, late, writes the array
					// gave up on (a stale superblock among them).
					m.serve(t, m.srv.Port, nil)
				case "slow":
					m.serve(t, m.srv.Port, nil) // the same address: --re-add names the member as before
				}
			}
			// A surviving member's bitmap says which chunks the lost ones
			// missed; --re-add writes those and nothing else.
			var surv string
			for i, m := range ms {
				lost := false
				for _, l := range c.lost {
					lost = lost || l.member == i
				}
				if !lost {
					surv = m.uri()
					break
				}
			}
			chunks, dirty := dirtyChunks(t, surv)
			if dirty == 0 || dirty >= chunks && !slow {
				t.Fatalf("bitmap of %s: %d of %d chunks dirty (fio covered a part of the array)", surv, dirty, chunks)
			}
			for i, l := range c.lost {
				m := ms[l.member]
				code, errs := mdtoolManage(t, runDir, md, "--re-add", m.uri())
				if code != 0 {
					t.Fatalf("--re-add %s: exit %d: %s", m.uri(), code, errs)
				}
				if i < len(c.lost)-1 {
					mdtool(t, "wait", md, "--run-dir", runDir)
				}
			}
			sy := waitHealthy(t, runDir, md)
			written := uint64(sy["written_sectors"].(float64))
			if limit := uint64(dirty) * 2048; sy["last_action"] != "recover" || written == 0 || written > limit {
				t.Errorf("re-add rebuilt %d sectors: want only the %d dirty 1 MiB chunks (at most %d sectors): %v", written, dirty, limit, sy)
			}
			t.Logf("%d of %d bitmap chunks dirty; the re-add wrote %d sectors", dirty, chunks, written)
			if code, _, errs := mdtool(t, "action", "check", md, "--run-dir", runDir); code != 0 {
				t.Fatalf("check: %d %s", code, errs)
			}
			sy = waitHealthy(t, runDir, md)
			if sy["last_action"] != "check" || sy["mismatch_cnt"].(float64) != 0 {
				t.Errorf("check after the re-add: %v", sy)
			}
			sum := md5hex(readArray(t, daemon.PathsFor(runDir, s.name).NBD(), arraySize(t, runDir, s.name)))
			s.stop()
			var imgs []string
			for i, m := range ms {
				imgs = append(imgs, m.img)
				ex := hostExamine(t, m.img)
				t.Logf("member %d: events %s, state %s, role %s, array %s", i, examineField(ex, "Events"),
					examineField(ex, "State"), examineField(ex, "Device Role"), arrayState(ex))
			}
			toKernel = append(toKernel, kernelCheck{name: c.name, imgs: imgs, md5: sum})
		})
	}
	if t.Failed() {
		return
	}
	kernelChecks(t, toKernel)
}

// memDir is a directory for member images in memory (/dev/shm) when there
// is one: a healthy member's flush (a superblock write) then costs no disk
// writeback behind fio's writes, so the stall measured is the array's.
func memDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return t.TempDir()
	}
	d, err := os.MkdirTemp("/dev/shm", "mdtool-remote")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// mdtoolManage runs a manage operation and returns its exit status and
// stderr.
func mdtoolManage(t *testing.T, runDir, md string, args ...string) (int, string) {
	t.Helper()
	code, _, errs := mdtool(t, append([]string{"manage", md, "--run-dir", runDir}, args...)...)
	return code, errs
}

// waitBitmapClean waits until the member's on-disk bitmap has no dirty bit.
func waitBitmapClean(t *testing.T, dev string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, dirty := dirtyChunks(t, dev)
		if dirty == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bitmap chunks still dirty", dev, dirty)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRemoteMembersTLS: members on nbds:// servers that require client
// certificates (nbdkit --tls=require --tls-verify-peer): created, examined
// and assembled with the certificates in the URI; a client without one is
// refused by the server.
func TestRemoteMembersTLS(t *testing.T) {
	dir := t.TempDir()
	md := "/dev/md/tlsr1"
	var withCert, noCert []string
	for i := 0; i < 2; i++ {
		h := nbdkit.NewHost(t)
		sdir, cdir, ndir := nbdkit.TLSDirs(t, h.IP)
		img := sparse(t, dir, fmt.Sprintf("tls-r%d.img", i), 32<<20)
		srv := nbdkit.StartIn(t, h, 10809, "--tls=require", "--tls-certificates="+sdir, "--tls-verify-peer", "file", img)
		withCert = append(withCert, srv.URI("nbds")+"?tls-certificates="+cdir)
		noCert = append(noCert, srv.URI("nbds")+"?tls-certificates="+ndir)
	}
	args := append([]string{"create", md, "--run", "--homehost=testhost", "--start=false", "-l1", "-n2", "--bitmap=internal"}, withCert...)
	if code, _, errs := mdtool(t, args...); code != 0 {
		t.Fatalf("create over nbds://: exit %d: %s", code, errs)
	}
	if code, out, errs := mdtool(t, "examine", withCert[1]); code != 0 || !strings.Contains(out, "Raid Level : raid1") {
		t.Fatalf("examine %s: exit %d:\n%s%s", withCert[1], code, out, errs)
	}
	if code, out, errs := mdtool(t, "examine", noCert[1]); code == 0 || strings.Contains(out, "Raid Level") {
		t.Fatalf("examine without a client certificate: exit %d:\n%s%s", code, out, errs)
	} else {
		t.Logf("without a client certificate: exit %d: %s", code, strings.TrimSpace(errs))
	}
	runDir := filepath.Join(dir, "run")
	s := serve(t, runDir, md, withCert...)
	data := nbdWrite(t, s.nbdURI(), 1<<20)
	if got := nbdRead(t, s.nbdURI(), len(data)); string(got) != string(data) {
		t.Fatal("data read back differs")
	}
	st, err := queryStatus(runDir, s.name)
	if err != nil || st.Degraded != 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	s.stop()

	// mdadm.conf: DEVICE lines name the remote members; -Es by URI gives
	// the ARRAY line; -As finds the members.
	code, arr, errs := mdtool(t, append([]string{"examine", "--scan", "--config=none"}, withCert...)...)
	if code != 0 || !strings.HasPrefix(arr, "ARRAY "+md+" ") {
		t.Fatalf("examine --scan: exit %d: %s%s", code, arr, errs)
	}
	conf := filepath.Join(dir, "mdadm.conf")
	if err := os.WriteFile(conf, []byte("DEVICE "+strings.Join(withCert, " ")+"\n"+arr), 0o644); err != nil {
		t.Fatal(err)
	}
	s = serve(t, runDir, md, "--scan", "--config="+conf)
	if got := nbdRead(t, s.nbdURI(), len(data)); string(got) != string(data) {
		t.Fatal("data differs after assemble --scan")
	}
	s.stop()
}

// TestRemoteReAddAutomatic: with --remote-readd, a member whose server
// went away is re-added by the daemon once the server answers again, with
// a bitmap-guided recovery; without it nothing happens by itself.
func TestRemoteReAddAutomatic(t *testing.T) {
	dir := t.TempDir()
	md := "/dev/md/autor1"
	var srvs []*nbdkit.Server
	var us []string
	for i := 0; i < 2; i++ {
		img := sparse(t, dir, fmt.Sprintf("auto-r%d.img", i), 32<<20)
		s := nbdkit.Start(t, "file", img)
		srvs = append(srvs, s)
		us = append(us, s.URI("nbd+unix"))
	}
	args := append([]string{"create", md, "--run", "--homehost=testhost", "--start=false", "--assume-clean", "-l1", "-n2",
		"--bitmap=internal", "--bitmap-chunk=1M"}, us...)
	if code, _, errs := mdtool(t, args...); code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	runDir := filepath.Join(dir, "run")
	s := serve(t, runDir, md, append([]string{"--remote-timeout=15s", "--remote-readd=100ms"}, us...)...)
	nbdWrite(t, s.nbdURI(), 1<<20)
	srvs[1].Stop()
	data := nbdWrite(t, s.nbdURI(), 2<<20)
	waitFaulty(t, runDir, s.name, us[1])
	srvs[1].Restart(t)
	sy := waitHealthy(t, runDir, md)
	if sy["last_action"] != "recover" {
		t.Errorf("after the server came back: %v", sy)
	}
	if st, err := queryStatus(runDir, s.name); err != nil || st.Degraded != 0 || len(st.Members) != 2 || st.Members[1].Path != us[1] || st.Members[1].State != "in_sync" {
		t.Errorf("after the automatic re-add: %+v %v", st, err)
	}
	if got := nbdRead(t, s.nbdURI(), len(data)); string(got) != string(data) {
		t.Fatal("data differs after the automatic re-add")
	}
	if code, _, errs := mdtool(t, "action", "check", md, "--run-dir", runDir); code != 0 {
		t.Fatalf("check: %d %s", code, errs)
	}
	if sy = waitHealthy(t, runDir, md); sy["last_action"] != "check" || sy["mismatch_cnt"].(float64) != 0 {
		t.Errorf("check: %v", sy)
	}
	s.stop()
}
