package controllers

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint asks the API server who each scraper is and whether it
// may get /metrics (the ClusterRole winready-metrics-reader, config/rbac).

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// MetricsServerOptions serve the metrics endpoint at addr as kubebuilder v4
// does: over HTTPS, each request authenticated with a TokenReview of its
// bearer token and authorized with a SubjectAccessReview of get on its path,
// both by the API server. certDir holds tls.crt and tls.key (reloaded when
// they change); without them the server makes a self-signed certificate at
// start. secure false serves plain HTTP to anyone, for a local demo.
func MetricsServerOptions(addr string, secure bool, certDir string) metricsserver.Options {
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
