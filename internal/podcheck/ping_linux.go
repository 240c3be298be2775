package podcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// errNoICMPSocket: neither an unprivileged ICMP socket (net.ipv4.ping_group_range
// covering the pod's group, which the check pods set as a safe sysctl) nor a
// raw one (CAP_NET_RAW) may be opened.
var errNoICMPSocket = errors.New("no ICMP socket may be opened")

var pingSeq atomic.Uint32

// ping sends one ICMP echo of size bytes (IP header included; 0 for the
// usual 84) to peer with Don't Fragment set, and waits for the reply.
func ping(ctx context.Context, peer netip.Addr, size int, timeout time.Duration) error {
	conn, raw, err := openPing()
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	const header = 20 + 8
	if size < header+8 {
		size = header + 56
	}
	seq := int(pingSeq.Add(1) & 0xffff)
	id := os.Getpid() & 0xffff
	msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: make([]byte, size-header)}}
	b, err := msg.Marshal(nil)
	if err != nil {
		return err
	}
	var to net.Addr = &net.UDPAddr{IP: peer.AsSlice()}
	if raw {
		to = &net.IPAddr{IP: peer.AsSlice()}
	}
	if _, err := conn.WriteTo(b, to); err != nil {
		return fmt.Errorf("sending an ICMP echo of %d bytes to %s: %w", size, peer, err)
	}
	buf := make([]byte, 65536)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no ICMP echo reply of %d bytes from %s: %w", size, peer, err)
		}
		if fromAddr(from) != peer {
			continue
		}
		// A raw socket's IP header is stripped by package net.
		m, err := icmp.ParseMessage(1, buf[:n])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
			continue
		}
		// An unprivileged socket's identifier is its port, set by the kernel.
		if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == seq && (!raw || e.ID == id) {
			return nil
		}
	}
}

func fromAddr(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	addr, _ := netip.AddrFromSlice(ip)
	return addr.Unmap()
}

// openPing opens an unprivileged ICMP socket, else a raw one; either sets
// Don't Fragment and ignores a learnt path MTU, so that the size sent is
// the size tried.
func openPing() (net.PacketConn, bool, error) {
	raw := false
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err != nil {
		var rerr error
		if fd, rerr = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); rerr != nil {
			return nil, false, fmt.Errorf("%w: unprivileged: %w; raw: %w", errNoICMPSocket, err, rerr)
		}
		raw = true
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE); err != nil {
		unix.Close(fd)
		return nil, false, fmt.Errorf("setting Don't Fragment: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
		unix.Close(fd)
		return nil, false, fmt.Errorf("binding the ICMP socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "icmp")
	defer f.Close()
	conn, err := net.FilePacketConn(f)
	if err != nil {
		return nil, false, fmt.Errorf("wrapping the ICMP socket: %w", err)
	}
	return conn, raw, nil
}
