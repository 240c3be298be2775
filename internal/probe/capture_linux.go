package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// capture reads UDP 4789 datagrams with a packet socket, which sees them
// even when a kernel VXLAN device owns the port. It needs CAP_NET_RAW.
type capture struct{ fd int }

// udpDst4789 accepts unfragmented IPv4 UDP packets to port 4789; the kernel
// drops the rest before they reach the agent.
var udpDst4789 = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 9, Size: 1},                                      // 0: IP protocol
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_UDP, SkipTrue: 6}, // 1: not UDP: drop
	bpf.LoadAbsolute{Off: 6, Size: 2},                                      // 2: flags and fragment offset
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},            // 3: a later fragment: drop
	bpf.LoadMemShift{Off: 0},                                               // 4: X = IP header length
	bpf.LoadIndirect{Off: 2, Size: 2},                                      // 5: UDP destination port
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: Port, SkipFalse: 1},               // 6
	bpf.RetConstant{Val: 65535},                                            // 7: accept
	bpf.RetConstant{Val: 0},                                                // 8: drop
}

func openCapture() (*capture, error) {
	proto := int(htons(unix.ETH_P_IP))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("opening a packet socket (needs CAP_NET_RAW): %w", err)
	}
	raw, err := bpf.Assemble(udpDst4789)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("attaching the UDP %d filter: %w", Port, err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &capture{fd: fd}, nil
}

var errNotUDP = errors.New("not a UDP 4789 datagram")

// Read returns the UDP payload of the next captured packet and its IPv4
// source address.
func (c *capture) Read(buf []byte) ([]byte, netip.Addr, error) {
	n, from, err := unix.Recvfrom(c.fd, buf, 0)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	// Only what arrives at this node counts, not the probes it sends.
	if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
		return nil, netip.Addr{}, errNotUDP
	}
	pkt := buf[:n]
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return nil, netip.Addr{}, errNotUDP
	}
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) < ihl+8 || binary.BigEndian.Uint16(pkt[ihl+2:ihl+4]) != Port {
		return nil, netip.Addr{}, errNotUDP
	}
	return pkt[ihl+8:], netip.AddrFrom4([4]byte(pkt[12:16])), nil
}

func (c *capture) Close() error { return unix.Close(c.fd) }

func htons(v uint16) uint16 { return v<<8 | v>>8 }
