package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/scootgate/scootgate/internal/snapshot"
)

// The profiling switch (docs/operations.md "Profiling"): off unless
// Options.Pprof names an address. The runtime's profiles are then served
// by net/http/pprof's handlers on a listener and a mux of their own: never
// on the client API listener, never on the health listener, never through
// http.DefaultServeMux (which importing net/http/pprof fills, and which
// the node serves nowhere).

// ErrPprofNotLoopback is returned for a profiling address that is not
// loopback without Options.PprofAllowRemote: profiles show the process's
// memory, and nothing authenticates who reads them.
var ErrPprofNotLoopback = errors.New("not a loopback address")

// CheckPprofAddr reports whether addr may serve profiles: a host:port
// whose host is "localhost" or a loopback IP literal (no name is
// resolved), or anything with allowRemote.
func CheckPprofAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("profiling address %q: %w", addr, err)
	}
	if !allowRemote && !snapshot.IsLoopback(host) {
		return fmt.Errorf("profiling address %q: %w (profiles are served without authentication; allow it explicitly to serve them on another interface)", addr, ErrPprofNotLoopback)
	}
	return nil
}

// pprofServer serves net/http/pprof's handlers under /debug/pprof/.
func pprofServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also every named profile: heap, goroutine, allocs, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: a CPU profile or trace answers after the
		// seconds it was asked for.
	}
}

// listenPprof opens the profiling listener, or returns nil when profiling
// is off.
func (n *node) listenPprof() (net.Listener, error) {
	if n.o.Pprof == "" {
		return nil, nil
	}
	if err := CheckPprofAddr(n.o.Pprof, n.o.PprofAllowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", n.o.Pprof)
	if err != nil {
		return nil, fmt.Errorf("profiling listener: %w", err)
	}
	n.log.Warn("profiling endpoints served (--pprof-listen); turn them off when done", "pprof", ln.Addr().String())
	return ln, nil
}
