// Package podcheck proves the pod network: short-lived pods on every Linux
// node serve a TCP echo and answer ICMP, test their peers on other nodes over
// TCP (a small payload and one filling the pod MTU), ICMP, DNS and a Service
// ClusterIP, and report through the round engine (internal/round). Diagnose
// compares a round with the baseline taken before the first change and names
// what broke: checksum offload, the MTU, or the VXLAN path between nodes.
package podcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Port is the TCP echo port of the check pods.
const Port = 9376

// Outcome is the result of one check.
type Outcome string

// The outcomes of one check: passed, failed, or not run.
const (
	Pass Outcome = "P"
	Fail Outcome = "F"
	// Unknown means the check could not run (no ICMP socket, nothing
	// configured).
	Unknown Outcome = "-"
)

// smallPayload is the size of the small TCP payload: one short segment.
const smallPayload = 64

// Config is one check pod's part of a round.
type Config struct {
	// PodIP is this pod's address; Peers are the pods on other nodes it tests.
	PodIP netip.Addr
	Peers []netip.Addr
	// Service is the ClusterIP and port of the Service whose backends are the
	// check pods, one per node; zero skips the Service check.
	Service netip.AddrPort
	// DNSName is looked up through the pod's resolver (kube-dns); empty skips it.
	DNSName string
	// Resolver overrides the pod's resolver (tests).
	Resolver *net.Resolver
	// MTU is the pod MTU; 0 takes the MTU of the interface holding PodIP.
	MTU int
	// Timeout bounds one attempt of one check; Attempts is how often a
	// failing check is tried before it counts as failed.
	Timeout  time.Duration
	Attempts int
}

// PeerResult is what one pod saw of one peer.
type PeerResult struct {
	Peer     netip.Addr `json:"peer"`
	ICMP     Outcome    `json:"icmp"`
	TCPSmall Outcome    `json:"tcp"`
	TCPFull  Outcome    `json:"tcpFull"`
	// PathMTU is the largest packet (IP header included) that reached the
	// peer with Don't Fragment set, measured only when the full-size TCP
	// check failed and the small one passed; 0 when not measured.
	PathMTU int `json:"pathMTU,omitempty"`
}

// Result is what one check pod saw.
type Result struct {
	MTU     int          `json:"mtu"`
	Peers   []PeerResult `json:"peers,omitempty"`
	DNS     Outcome      `json:"dns"`
	Service Outcome      `json:"service"`
	// Detail says why a check failed, briefly (bounded by the report).
	Detail string `json:"detail,omitempty"`
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	c.MTU = c.PodMTU()
}

// PodMTU is the configured MTU, else that of the interface holding PodIP.
func (c Config) PodMTU() int {
	if c.MTU > 0 {
		return c.MTU
	}
	return interfaceMTU(c.PodIP)
}

// interfaceMTU is the MTU of the interface that holds addr, or 1500.
func interfaceMTU(addr netip.Addr) int {
	ifaces, err := net.Interfaces()
	if err != nil {
		return 1500
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr {
				return ifc.MTU
			}
		}
	}
	return 1500
}

// MaxConns bounds the echo's connections at a time. Each holds a copy
// buffer, and the pod's memory limit is 64 MiB: unbounded, any pod that
// reaches the echo could have it killed and make a healthy step look broken.
// A round's peers use a few at a time.
const MaxConns = 64

// Serve echoes every TCP connection on ln until ctx ends: it sends back what
// it reads until the client half-closes. Beyond MaxConns at a time a
// connection is closed at once, costing nothing; a peer's check retries.
func Serve(ctx context.Context, ln net.Listener) error { return serve(ctx, ln, MaxConns) }

func serve(ctx context.Context, ln net.Listener, maxConns int) error {
	go func() { <-ctx.Done(); _ = ln.Close() }()
	slots := make(chan struct{}, maxConns)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the context ended: the listener was closed to stop the agent, not broken
			}
			return fmt.Errorf("accepting check connections: %w", err)
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = conn.Close()
			continue
		}
		go func() {
			defer func() { <-slots }()
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.Copy(conn, conn)
		}()
	}
}

// Run tests every peer, the Service and DNS, peers in parallel.
func Run(ctx context.Context, cfg Config) Result {
	cfg.defaults()
	res := Result{MTU: cfg.MTU, Peers: make([]PeerResult, len(cfg.Peers)), DNS: Unknown, Service: Unknown}
	var wg sync.WaitGroup
	for i, peer := range cfg.Peers {
		wg.Go(func() { res.Peers[i] = checkPeer(ctx, cfg, peer) })
	}
	var details []string
	if cfg.DNSName != "" {
		var why string
		res.DNS, why = retry(cfg, func() error { return lookup(ctx, cfg, cfg.DNSName) })
		details = appendDetail(details, "dns", why)
	}
	if cfg.Service.IsValid() {
		var why string
		res.Service, why = retry(cfg, func() error { return echo(ctx, cfg.Service, smallPayload, cfg.Timeout) })
		details = appendDetail(details, "service", why)
	}
	wg.Wait()
	res.Detail = joinDetails(details)
	return res
}

func checkPeer(ctx context.Context, cfg Config, peer netip.Addr) PeerResult {
	r := PeerResult{Peer: peer}
	to := netip.AddrPortFrom(peer, Port)
	r.ICMP, _ = retry(cfg, func() error { return ping(ctx, peer, 0, cfg.Timeout) })
	r.TCPSmall, _ = retry(cfg, func() error { return echo(ctx, to, smallPayload, cfg.Timeout) })
	// Twice the MTU: the first segments fill the MSS both ways.
	r.TCPFull, _ = retry(cfg, func() error { return echo(ctx, to, 2*cfg.MTU, cfg.Timeout) })
	if r.TCPSmall == Pass && r.TCPFull == Fail {
		r.PathMTU = pathMTU(ctx, peer, cfg.MTU, cfg.Timeout/2)
	}
	return r
}

// retry runs check up to cfg.Attempts times; it passes on the first
// success. ICMP that no socket may carry is Unknown, not a failure.
func retry(cfg Config, check func() error) (Outcome, string) {
	var err error
	for range cfg.Attempts {
		if err = check(); err == nil {
			return Pass, ""
		}
		if errors.Is(err, errNoICMPSocket) {
			return Unknown, err.Error()
		}
	}
	return Fail, err.Error()
}

// echo sends size bytes over TCP and expects them back.
func echo(ctx context.Context, to netip.AddrPort, size int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp4", to.String())
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Write(payload)
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(conn)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("sending %d bytes to %s: %w", size, to, werr)
	}
	if err != nil {
		return fmt.Errorf("reading %d bytes back from %s (%d arrived): %w", size, to, len(got), err)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("%s echoed %d bytes of %d, or changed them", to, len(got), size)
	}
	return nil
}

// lookup resolves name and expects an address.
func lookup(ctx context.Context, cfg Config, name string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	r := cfg.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupHost(ctx, name)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%s resolved to no address", name)
	}
	return nil
}

// pathMTU finds the largest packet, between 576 bytes and mtu, that reaches
// peer with Don't Fragment set, by halving the interval.
func pathMTU(ctx context.Context, peer netip.Addr, mtu int, timeout time.Duration) int {
	passes := func(size int) bool {
		for range 2 {
			if ping(ctx, peer, size, timeout) == nil {
				return true
			}
		}
		return false
	}
	lo, hi := 576, mtu
	if !passes(lo) {
		return 0
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if passes(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func appendDetail(details []string, what, why string) []string {
	if why == "" {
		return details
	}
	return append(details, what+": "+why)
}

// maxDetail bounds the detail a report carries.
const maxDetail = 512

func joinDetails(details []string) string {
	var b bytes.Buffer
	for i, d := range details {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d)
	}
	if b.Len() > maxDetail {
		return b.String()[:maxDetail]
	}
	return b.String()
}
