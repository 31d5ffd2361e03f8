//go:build !linux

package handlers

import (
	"net"
	"time"
)

// resetWhenClosed and abortIfStalled are Linux's alone (it asks the kernel what is unsent); elsewhere a stalled client's
// connection is closed the ordinary way.
func abortIfStalled(*net.TCPConn, time.Duration) {}

func resetWhenClosed(*net.TCPConn) {}
