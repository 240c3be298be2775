package detect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// RootCAConfigMap is the ConfigMap the API server's root CA publisher puts
// into every namespace; its key holds the cluster CA in PEM.
const (
	RootCAConfigMap = "kube-root-ca.crt"
	RootCAKey       = "ca.crt"
)

// proveTimeout bounds the dial and the handshake of one proof.
const proveTimeout = 3 * time.Second

// Prove connects to host:port and completes a TLS handshake that verifies
// the serving certificate against the cluster CA for that host (an IP SAN
// for an address, a DNS SAN for a name). An address that passes is an API
// server of this cluster reachable from where winready runs; a typo, another
// cluster's endpoint or a hostile edit of the spec fails with the
// handshake's own error.
func Prove(ctx context.Context, host, port string, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("the cluster CA holds no PEM certificate")
	}
	ctx, cancel := context.WithTimeout(ctx, proveTimeout)
	defer cancel()
	d := &tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", net.JoinHostPort(host, port), err)
	}
	return conn.Close()
}
