package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"mdtool/internal/serve/metrics"
)

// MetricsServer serves a metrics registry over HTTP at /metrics.
type MetricsServer struct {
	srv  *http.Server
	addr string
}

// ServeMetrics listens on addr (host:port) and serves reg at /metrics.
func ServeMetrics(addr string, reg *metrics.Registry) (*MetricsServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", reg.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "mdtool metrics: /metrics")
	})
	m := &MetricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, addr: l.Addr().String()}
	go m.srv.Serve(l)
	return m, nil
}

// Addr is the address served.
func (m *MetricsServer) Addr() string { return m.addr }

// Close stops the server.
func (m *MetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return m.srv.Shutdown(ctx)
}

// LoadTLS builds the TLS configuration of the NBD TCP listener: the
// server certificate and key (PEM files) and, if ca is not empty, the CA
// that client certificates must be signed by (clients must then present
// one).
func LoadTLS(cert, key, ca string) (*tls.Config, error) {
	if cert == "" || key == "" {
		return nil, errors.New("TLS needs both a certificate and a key")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate found", ca)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
