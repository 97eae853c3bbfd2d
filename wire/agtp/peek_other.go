//go:build !unix

package agtp

import "net"

// peekIdle cannot ask the socket on this platform.
func peekIdle(net.Conn) (gone, ok bool) { return false, false }
