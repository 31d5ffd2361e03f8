package handlers

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// abortIfStalled resets c if bytes it was given are still unsent after wait: its client has stopped
// reading, so what is queued would never leave, and a close would keep it queued in the kernel
// (FIN_WAIT1) for minutes. A reset frees it at once.
func abortIfStalled(c *net.TCPConn, wait time.Duration) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	unsent := func() int {
		n := 0
		raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		return n
	}
	for deadline := time.Now().Add(wait); unsent() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.SetLinger(0) // the close that net/http makes next is then a reset
			return
		}
	}
}
