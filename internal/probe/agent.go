package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Receive modes.
const (
	// ModeSocket means the agent bound UDP 4789 itself: nothing else owns it.
	ModeSocket = "socket"
	// ModeCapture means a kernel VXLAN device owns UDP 4789, so the agent
	// watches the port with a packet capture instead.
	ModeCapture = "capture"
)

// AgentConfig is one agent's part of a preflight round.
type AgentConfig struct {
	Round [16]byte
	// Secret authenticates the round's probes: only probes signed with it
	// count, and only from the address they claim.
	Secret []byte
	// NodeIP is the node address probes are sent from and expected at.
	NodeIP netip.Addr
	// Peers are the nodes this agent probes.
	Peers []netip.Addr
	// Expect are the nodes that probe this agent: once all of them were
	// heard and every extra target echoed, the agent's result is complete.
	Expect []netip.Addr
	// Extra are responders this agent probes; they echo each probe.
	Extra []netip.Addr
	// Start and End are the round's window, the same for every agent of the
	// round: the agent waits for the start, probes until shortly before the
	// end and receives until the end, however late it came up, so that a
	// peer that started late is still heard and still hears it. Zero, the
	// window starts when Run does and lasts Duration.
	Start, End time.Time
	Duration   time.Duration
	// Interval is the time between two probes to the same peer.
	Interval time.Duration
}

// defaultInterval is the time between two probes to the same peer.
const defaultInterval = 200 * time.Millisecond

// Window is when an agent of cfg's round that came up at up probes (from
// until sendUntil) and listens (from until end): from the round's start, or
// from up if later, and it stops sending early enough for its last probes
// to arrive before its peers stop listening. Two agents hear each other
// when their windows overlap, however late either came up.
func Window(cfg AgentConfig, up time.Time) (from, sendUntil, end time.Time) {
	start, end := cfg.Start, cfg.End
	if start.IsZero() {
		start = up
	}
	if end.IsZero() {
		end = start.Add(cfg.Duration)
	}
	margin := max(2*cmp.Or(cfg.Interval, defaultInterval), end.Sub(start)/10)
	if up.After(start) {
		start = up
	}
	return start, end.Add(-margin), end
}

// Result is what an agent saw.
type Result struct {
	Mode string `json:"mode"`
	// ReceivedFrom are the nodes whose probes reached this node.
	ReceivedFrom []netip.Addr `json:"receivedFrom,omitempty"`
	// EchoedBy are the extra targets that echoed this agent's probes.
	EchoedBy []netip.Addr `json:"echoedBy,omitempty"`
}

// receiver yields the UDP 4789 payloads that reach this node.
type receiver interface {
	// Read returns the next payload and the address it came from, or a
	// timeout error after a short while so that the caller can check its
	// context.
	Read(buf []byte) ([]byte, netip.Addr, error)
	Close() error
}

// seen is a set of addresses, safe for concurrent use.
type seen struct {
	mu    sync.Mutex
	addrs map[netip.Addr]bool
}

func (s *seen) add(a netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addrs == nil {
		s.addrs = map[netip.Addr]bool{}
	}
	s.addrs[a] = true
}

func (s *seen) hasAll(addrs []netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range addrs {
		if !s.addrs[a] {
			return false
		}
	}
	return true
}

func (s *seen) sorted() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]netip.Addr, 0, len(s.addrs))
	for a := range s.addrs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// Agent holds the sockets of one round. Open it (inside the node's network
// namespace), then Run it.
type Agent struct {
	cfg  AgentConfig
	mode string
	recv receiver
	send *net.UDPConn
}

// Open opens the receiving and sending sockets: UDP 4789 when it is free,
// else a capture of it; and a UDP socket on the node address for sending.
func Open(cfg AgentConfig) (*Agent, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = defaultInterval
	}
	a := &Agent{cfg: cfg}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: Port})
	switch {
	case err == nil:
		a.mode, a.recv = ModeSocket, &socketReceiver{conn: conn}
	case errors.Is(err, syscall.EADDRINUSE):
		c, err := openCapture()
		if err != nil {
			return nil, fmt.Errorf("UDP %d is in use (a VXLAN device owns it) and capturing it failed: %w", Port, err)
		}
		a.mode, a.recv = ModeCapture, c
	default:
		return nil, fmt.Errorf("listening on UDP %d: %w", Port, err)
	}
	a.send, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.NodeIP, 0)))
	if err != nil {
		_ = a.recv.Close()
		return nil, fmt.Errorf("opening the sending socket on %s: %w", cfg.NodeIP, err)
	}
	return a, nil
}

// Mode says how the agent receives.
func (a *Agent) Mode() string { return a.mode }

// Run waits for the window's start, then probes and receives until its
// end, and closes the sockets. report, when set, is called once with the
// result as soon as it is complete (every expected node heard, every extra
// target echoed), else at the end; the agent goes on probing meanwhile, for
// peers that came up later.
func (a *Agent) Run(ctx context.Context, report func(Result)) Result {
	from, sendUntil, end := Window(a.cfg, time.Now())
	defer func() { _ = a.recv.Close(); _ = a.send.Close() }()
	select {
	case <-ctx.Done():
		return Result{Mode: a.mode}
	case <-time.After(time.Until(from)):
	}
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var received, echoed seen
	result := func() Result {
		return Result{Mode: a.mode, ReceivedFrom: received.sorted(), EchoedBy: echoed.sorted()}
	}
	var once sync.Once
	complete := func() {
		if report != nil && received.hasAll(a.cfg.Expect) && echoed.hasAll(a.cfg.Extra) {
			once.Do(func() { report(result()) })
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.receive(ctx, &received, complete) })
	wg.Go(func() { a.receiveEchoes(ctx, &echoed, complete) })
	complete()
	a.sendProbes(ctx, sendUntil)
	<-ctx.Done()
	_ = a.recv.Close()
	_ = a.send.Close()
	wg.Wait()
	res := result()
	if report != nil {
		once.Do(func() { report(res) })
	}
	return res
}

func (a *Agent) sendProbes(ctx context.Context, until time.Time) {
	sendCtx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	targets := append(slices.Clone(a.cfg.Peers), a.cfg.Extra...)
	tick := time.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	for seq := uint32(0); ; seq++ {
		for _, to := range targets {
			p := Packet{Kind: KindProbe, Round: a.cfg.Round, From: a.cfg.NodeIP, To: to, Seq: seq}
			p.Sign(a.cfg.Secret)
			// A lost datagram is what the round measures; send errors such
			// as an unreachable network mean the same.
			_, _ = a.send.WriteToUDPAddrPort(p.Marshal(), netip.AddrPortFrom(to, Port))
		}
		select {
		case <-sendCtx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *Agent) receive(ctx context.Context, received *seen, added func()) {
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		payload, src, err := a.recv.Read(buf)
		if err != nil {
			continue
		}
		p, err := Unmarshal(payload)
		// A probe counts for the node it claims only if it left from that
		// node's address and carries the round's secret.
		if err != nil || p.Kind != KindProbe || p.Round != a.cfg.Round || p.To != a.cfg.NodeIP || p.From == a.cfg.NodeIP ||
			src != p.From || !p.Valid(a.cfg.Secret) {
			continue
		}
		received.add(p.From)
		added()
	}
}

func (a *Agent) receiveEchoes(ctx context.Context, echoed *seen, added func()) {
	buf := make([]byte, 2048)
	for ctx.Err() == nil {
		_ = a.send.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, src, err := a.send.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		p, err := Unmarshal(buf[:n])
		// An echo is this agent's own probe, signed, sent back by the
		// address it was sent to.
		if err != nil || p.Kind != KindEcho || p.Round != a.cfg.Round || p.From != a.cfg.NodeIP ||
			src.Addr().Unmap() != p.To || !p.Valid(a.cfg.Secret) {
			continue
		}
		echoed.add(p.To)
		added()
	}
}

// socketReceiver reads UDP 4789 from a socket of its own.
type socketReceiver struct{ conn *net.UDPConn }

func (s *socketReceiver) Read(buf []byte) ([]byte, netip.Addr, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	n, from, err := s.conn.ReadFromUDPAddrPort(buf)
	return buf[:n], from.Addr().Unmap(), err
}

func (s *socketReceiver) Close() error { return s.conn.Close() }

// Respond echoes every probe that reaches conn until ctx ends. It runs on
// machines that are not nodes yet, such as future Windows nodes.
func Respond(ctx context.Context, conn *net.UDPConn, onProbe func(Packet, netip.AddrPort)) error {
	go func() { <-ctx.Done(); _ = conn.Close() }()
	buf := make([]byte, 2048)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the context ended: the socket was closed to stop the agent, not broken
			}
			return fmt.Errorf("reading probes: %w", err)
		}
		p, err := Unmarshal(buf[:n])
		if err != nil || p.Kind != KindProbe {
			continue
		}
		if onProbe != nil {
			onProbe(p, from)
		}
		p.Kind = KindEcho
		_, _ = conn.WriteToUDPAddrPort(p.Marshal(), from)
	}
}
