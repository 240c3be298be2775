// Package probe proves that UDP 4789, the port VXLAN uses, passes between
// nodes. An agent on each node sends probe datagrams from its node address to
// its peers and records the probes that reach it; a responder on a machine
// that is not a node yet (a future Windows node) echoes them back.
//
// Probes are valid VXLAN packets for a VNI that no Calico device uses, whose
// inner frame carries an experimental EtherType: a kernel VXLAN device that
// owns port 4789 looks the VNI up, finds no device and drops the packet, so a
// live vxlan.calico is never disturbed.
package probe

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/netip"
)

// Port is the VXLAN port Windows requires.
const Port = 4789

// VNI is the VXLAN network identifier of probes: the highest one, which
// Calico (4096 for IPv4, 4097 for IPv6) does not use.
const VNI = 0xFFFFFF

// etherTypeLocalExperimental (IEEE 802 local experimental EtherType 1) marks
// the inner frame as nobody's traffic.
const etherTypeLocalExperimental = 0x88B5

var magic = [8]byte{'W', 'R', 'P', 'R', 'O', 'B', 'E', '1'}

// Kind tells a probe from its echo.
type Kind byte

// The kinds of packet: a probe, and the responder's echo of one.
const (
	KindProbe Kind = 1
	KindEcho  Kind = 2
)

// Packet is what a probe carries.
type Packet struct {
	Kind Kind
	// Round identifies the preflight round, so that stale probes are ignored.
	Round [16]byte
	// From and To are the sender's node address and the address probed.
	From, To netip.Addr
	Seq      uint32
	// MAC authenticates the probe with the round's secret (Sign). The round
	// ID is public (in the status and an Event), so it alone would let any
	// pod that reaches a node on UDP 4789 forge a passing pair. The MAC
	// leaves out the kind, so that a responder, which has no secret, can
	// echo a probe as it came.
	MAC [macLen]byte
}

const (
	macLen         = 16
	vxlanHeaderLen = 8
	ethHeaderLen   = 14
	bodyLen        = len(magic) + 1 + 16 + 4 + 4 + 4 + macLen
	// Size is the length of an encoded probe: VXLAN header, inner Ethernet
	// header and body.
	Size = vxlanHeaderLen + ethHeaderLen + bodyLen
)

// RoundKey is the 16-byte form of a round name that probes carry.
func RoundKey(round string) [16]byte {
	sum := sha256.Sum256([]byte(round))
	return [16]byte(sum[:16])
}

func (p Packet) mac(secret []byte) [macLen]byte {
	h := hmac.New(sha256.New, secret)
	var fields [16 + 4 + 4 + 4]byte
	copy(fields[0:16], p.Round[:])
	from, to := p.From.As4(), p.To.As4()
	copy(fields[16:20], from[:])
	copy(fields[20:24], to[:])
	binary.BigEndian.PutUint32(fields[24:28], p.Seq)
	h.Write(fields[:])
	return [macLen]byte(h.Sum(nil))
}

// Sign sets p's MAC with the round's secret.
func (p *Packet) Sign(secret []byte) { p.MAC = p.mac(secret) }

// Valid says whether p was signed with secret. An empty secret signs
// nothing; probes are between IPv4 node addresses.
func (p Packet) Valid(secret []byte) bool {
	if len(secret) == 0 || !p.From.Is4() || !p.To.Is4() {
		return false
	}
	want := p.mac(secret)
	return hmac.Equal(p.MAC[:], want[:])
}

// ErrNotProbe is returned for datagrams that are not winready probes.
var ErrNotProbe = errors.New("not a winready probe")

// Marshal encodes p as a VXLAN datagram payload.
func (p Packet) Marshal() []byte {
	b := make([]byte, Size)
	// VXLAN: flags with the I bit (VNI valid), 24 reserved bits, VNI, 8 reserved bits.
	b[0] = 0x08
	b[4], b[5], b[6] = byte(VNI>>16), byte(VNI>>8&0xff), byte(VNI&0xff)
	eth := b[vxlanHeaderLen:]
	copy(eth[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(eth[6:12], []byte{0x02, 'w', 'r', 'd', 'y', 0x01}) // locally administered
	binary.BigEndian.PutUint16(eth[12:14], etherTypeLocalExperimental)
	body := eth[ethHeaderLen:]
	copy(body, magic[:])
	body[8] = byte(p.Kind)
	copy(body[9:25], p.Round[:])
	from, to := p.From.As4(), p.To.As4()
	copy(body[25:29], from[:])
	copy(body[29:33], to[:])
	binary.BigEndian.PutUint32(body[33:37], p.Seq)
	copy(body[37:37+macLen], p.MAC[:])
	return b
}

// Unmarshal decodes a VXLAN datagram payload.
func Unmarshal(b []byte) (Packet, error) {
	if len(b) < Size || b[0] != 0x08 ||
		uint32(b[4])<<16|uint32(b[5])<<8|uint32(b[6]) != VNI {
		return Packet{}, ErrNotProbe
	}
	eth := b[vxlanHeaderLen:]
	if binary.BigEndian.Uint16(eth[12:14]) != etherTypeLocalExperimental {
		return Packet{}, ErrNotProbe
	}
	body := eth[ethHeaderLen:]
	if !bytes.Equal(body[:8], magic[:]) {
		return Packet{}, ErrNotProbe
	}
	p := Packet{Kind: Kind(body[8]), Seq: binary.BigEndian.Uint32(body[33:37])}
	copy(p.Round[:], body[9:25])
	p.From = netip.AddrFrom4([4]byte(body[25:29]))
	p.To = netip.AddrFrom4([4]byte(body[29:33]))
	copy(p.MAC[:], body[37:37+macLen])
	if p.Kind != KindProbe && p.Kind != KindEcho {
		return Packet{}, ErrNotProbe
	}
	return p, nil
}
