//go:build !linux

package podcheck

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// The check pods run on Linux nodes only.
var errNoICMPSocket = errors.New("ICMP checks are supported on Linux only")

func ping(context.Context, netip.Addr, int, time.Duration) error { return errNoICMPSocket }
