package probe

import (
	"errors"
	"net/netip"
	"testing"
)

func TestPacketRoundTrip(t *testing.T) {
	p := Packet{Kind: KindProbe, Round: [16]byte{1, 2, 3}, From: netip.MustParseAddr("10.0.0.1"),
		To: netip.MustParseAddr("10.0.0.2"), Seq: 7}
	p.Sign([]byte("round secret"))
	b := p.Marshal()
	if len(b) != Size {
		t.Fatalf("encoded %d bytes, want %d", len(b), Size)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != p {
		t.Fatalf("got %+v, want %+v", got, p)
	}
}

func TestUnmarshalRejectsOtherTraffic(t *testing.T) {
	valid := Packet{Kind: KindProbe, From: netip.MustParseAddr("10.0.0.1"), To: netip.MustParseAddr("10.0.0.2")}.Marshal()
	calicoVNI := append([]byte(nil), valid...)
	calicoVNI[4], calicoVNI[5], calicoVNI[6] = 0, 0x10, 0 // VNI 4096, Calico's
	otherEtherType := append([]byte(nil), valid...)
	otherEtherType[8+12], otherEtherType[8+13] = 0x08, 0x00
	badMagic := append([]byte(nil), valid...)
	badMagic[8+14] = 'X'
	badKind := append([]byte(nil), valid...)
	badKind[8+14+8] = 9
	for name, b := range map[string][]byte{
		"short":            valid[:Size-1],
		"calico VNI":       calicoVNI,
		"IPv4 inner frame": otherEtherType,
		"bad magic":        badMagic,
		"unknown kind":     badKind,
		"no VNI flag":      append([]byte{0}, valid[1:]...),
	} {
		if _, err := Unmarshal(b); !errors.Is(err, ErrNotProbe) {
			t.Errorf("%s: got %v, want ErrNotProbe", name, err)
		}
	}
}

func TestOnlyTheRoundSecretSignsAProbe(t *testing.T) {
	secret := []byte("round secret")
	p := Packet{Kind: KindProbe, Round: [16]byte{1}, From: netip.MustParseAddr("10.0.0.1"),
		To: netip.MustParseAddr("10.0.0.2"), Seq: 1}
	p.Sign(secret)
	if !p.Valid(secret) {
		t.Fatal("a signed probe is not valid")
	}
	echo := p
	echo.Kind = KindEcho
	if !echo.Valid(secret) {
		t.Fatal("a responder's echo, which has no secret, is not valid")
	}
	if p.Valid([]byte("another round's secret")) {
		t.Fatal("valid under another secret")
	}
	for name, change := range map[string]func(*Packet){
		"sender": func(q *Packet) { q.From = netip.MustParseAddr("10.0.0.3") },
		"target": func(q *Packet) { q.To = netip.MustParseAddr("10.0.0.3") },
		"round":  func(q *Packet) { q.Round[0] = 2 },
		"seq":    func(q *Packet) { q.Seq++ },
	} {
		q := p
		change(&q)
		if q.Valid(secret) {
			t.Errorf("another %s keeps the MAC valid", name)
		}
	}
	var unsigned Packet
	if unsigned.Valid(nil) {
		t.Fatal("an empty secret signs")
	}
}
