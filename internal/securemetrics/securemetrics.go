// Package securemetrics serves the manager's metrics endpoint. It is a
// package of its own so that what imports the controllers (the test kit, and
// the CI suites of platform teams built on it) does not take in the API
// server libraries its filter needs.
package securemetrics

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options serve the metrics endpoint at addr as kubebuilder v4
// does: over HTTPS, each request authenticated with a TokenReview of its
// bearer token and authorized with a SubjectAccessReview of get on its path,
// both by the API server. certDir holds tls.crt and tls.key (reloaded when
// they change); without them the server makes a self-signed certificate at
// start. secure false serves plain HTTP to anyone, for a local demo. The
// manager's RBAC (controllers/rbac.go) lets it create both reviews.
func Options(addr string, secure bool, certDir string) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		CertDir:        certDir,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// HTTP/1.1 only, as kubebuilder serves it: HTTP/2's stream resets let
		// a client that is refused still load the server (CVE-2023-44487,
		// CVE-2023-39325), and Prometheus scrapes over HTTP/1.1.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}
