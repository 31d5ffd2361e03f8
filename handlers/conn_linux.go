package handlers

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// resetWhenClosed makes a close of c a reset until abortIfStalled finds that its client has taken
// every byte: net/http closes a connection itself when a write fails, as a write to a client that
// stopped reading does once its deadline passes, and a plain close would keep what is unsent
// queued in the kernel (FIN_WAIT1) for minutes.
func resetWhenClosed(c *net.TCPConn) { c.SetLinger(0) }

// abortIfStalled resets c if bytes it was given are still unsent after wait: its client has stopped
// reading, so what is queued would never leave, and a close would keep it queued in the kernel
// (FIN_WAIT1) for minutes. A reset frees it at once. If every byte has been taken, the close is an
// ordinary one again, so that what net/http writes last reaches the client.
func abortIfStalled(c *net.TCPConn, wait time.Duration) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	// unsent is how many bytes the kernel still holds for the peer; a connection it cannot ask
	// about counts as stalled.
	unsent := func() int {
		n, err := -1, error(nil)
		if controlErr := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); controlErr != nil || err != nil {
			return -1
		}
		return n
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		n := unsent()
		if n == 0 {
			c.SetLinger(-1)
			return
		}
		if n < 0 || time.Now().After(deadline) {
			c.SetLinger(0) // the close that net/http makes next is then a reset
			return
		}
	}
}
