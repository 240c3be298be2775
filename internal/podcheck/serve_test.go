package podcheck

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoes says whether conn echoes a message back.
func echoes(t *testing.T, conn net.Conn) bool {
	t.Helper()
	if _, err := conn.Write([]byte("ping")); err != nil {
		return false
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(conn, buf)
	return err == nil && string(buf) == "ping"
}

func TestTheEchoServesABoundedNumberOfConnections(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, 3) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	var held []net.Conn
	for range 3 {
		conn := dial()
		// Served: its slot is taken before the next connection is accepted.
		if !echoes(t, conn) {
			t.Fatal("a connection within the bound is not echoed")
		}
		held = append(held, conn)
	}
	over := dial()
	// An echo that served it would wait for data: the deadline turns that
	// into a failure rather than a hang.
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection beyond the bound: read %v, want it closed at once", err)
	}
	if !echoes(t, held[0]) {
		t.Fatal("the connections within the bound stop being echoed")
	}

	// A slot freed is served again, once the echo has seen the close.
	_ = held[0].Close()
	for i := 0; ; i++ {
		if echoes(t, dial()) {
			break
		}
		if i == 1000 {
			t.Fatal("a freed slot is never served again")
		}
	}
}
