package engine

import (
	"context"
	"errors"
	"time"

	"mdtool/internal/nbdclient"
)

// OpenMember opens a member named by a path (OpenFile) or by an NBD URI
// (OpenNBD, with MemberDeadline(o.RemoteTimeout): remote_bound.go).
// Connecting to a server is bounded by DialTimeout.
func OpenMember(path string, o FileOptions) (Device, error) {
	if !nbdclient.IsURI(path) {
		return OpenFile(path, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	return OpenNBD(ctx, path, nbdclient.Options{Conns: RemoteConns, Timeout: MemberDeadline(o.RemoteTimeout)})
}

// DialTimeout bounds connecting to a remote member's server.
const DialTimeout = 30 * time.Second

// RemoteConns is the number of connections to a remote member's server
// (used when the server allows several).
const RemoteConns = 4

// NBDDevice is a member on an NBD server (nbd://, nbds://, nbd+unix://):
// the engine's Device over an [nbdclient.Client].
type NBDDevice struct {
	c    *nbdclient.Client
	geom DeviceGeometry
}

// OpenNBD opens the export uri names. A server that stops answering for
// o.Timeout fails every request (an error wrapping nbdclient.ErrTimeout),
// so that the array fails the member instead of waiting.
func OpenNBD(ctx context.Context, uri string, o nbdclient.Options) (*NBDDevice, error) {
	u, err := nbdclient.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	c, err := nbdclient.Dial(ctx, u, o)
	if err != nil {
		return nil, err
	}
	min, pref, _ := c.BlockSizes()
	g := DeviceGeometry{Size: c.Size(), LogicalBlock: min, PhysicalBlock: pref}
	if g.LogicalBlock < 512 {
		g.LogicalBlock = 512
	}
	if g.PhysicalBlock < g.LogicalBlock || g.PhysicalBlock&(g.PhysicalBlock-1) != 0 {
		g.PhysicalBlock = g.LogicalBlock
	}
	if g.PhysicalBlock > 64<<10 {
		g.PhysicalBlock = g.LogicalBlock
	}
	return &NBDDevice{c: c, geom: g}, nil
}

// ReadAt implements Device.
func (d *NBDDevice) ReadAt(p []byte, off int64) (int, error) { return d.c.ReadAt(p, off) }

// WriteAt implements Device.
func (d *NBDDevice) WriteAt(p []byte, off int64) (int, error) { return d.c.WriteAt(p, off) }

// WriteAtFUA implements FUAWriter.
func (d *NBDDevice) WriteAtFUA(p []byte, off int64) (int, error) { return d.c.WriteAtFUA(p, off) }

// WriteZeroes implements ZeroWriter.
func (d *NBDDevice) WriteZeroes(off, n int64) error { return d.c.WriteZeroes(off, n, false) }

// Flush implements Device.
func (d *NBDDevice) Flush() error { return d.c.Flush() }

// Discard implements Device.
func (d *NBDDevice) Discard(off, n int64) error { return d.c.Discard(off, n) }

// Close implements Device.
func (d *NBDDevice) Close() error { return d.c.Close() }

// Geometry implements Device.
func (d *NBDDevice) Geometry() DeviceGeometry { return d.geom }

// Latency is the server's recent reply time (LatencyReporter).
func (d *NBDDevice) Latency() time.Duration { return d.c.Latency() }

// Client is the underlying NBD client (state, URI, connections).
func (d *NBDDevice) Client() *nbdclient.Client { return d.c }

// Lost is closed when the client has failed or was closed (lossReporter).
func (d *NBDDevice) Lost() <-chan struct{} { return d.c.Failed() }

// LostErr is why the member's server is lost; errDeviceClosed when the
// device was closed on purpose.
func (d *NBDDevice) LostErr() error {
	err := d.c.Err()
	if errors.Is(err, nbdclient.ErrClosed) {
		return errDeviceClosed
	}
	return err
}

// Failed reports whether the connection to the server is lost or timed out.
func (d *NBDDevice) Failed() bool {
	err := d.c.Err()
	return err != nil && !errors.Is(err, nbdclient.ErrClosed)
}
