package rawconn

import "net"

// Listener wraps each connection it accepts with Wrap.
type Listener struct{ net.Listener }

// Accept waits for the next connection and returns it wrapped.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
