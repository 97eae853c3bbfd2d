//go:build unix

package agtp

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peekIdle asks the socket under an idle connection, without waiting,
// whether anything arrived: bytes or an end of stream both make it unusable.
// ok is false when the socket cannot be asked.
func peekIdle(conn net.Conn) (gone, ok bool) {
	if tc, isTLS := conn.(*tls.Conn); isTLS {
		conn = tc.NetConn()
	}
	sc, isSys := conn.(syscall.Conn)
	if !isSys {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing arrived: the connection is alive. Bytes, an end of
		// stream or an error all make it unusable.
		gone = !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EWOULDBLOCK)
		return true
	})
	if err != nil {
		return true, true
	}
	return gone, true
}
