// Package cpserver is a tiny development control plane for `make run` and
// tests: it serves the routing and the authorization snapshot from files in
// a local directory over HTTP on a loopback address, with the conditional
// GET the node's puller uses (docs/snapshots.md). It is a dev/test tool: cmd/scootgate
// and internal/app never import it.
//
// # Basics
//
//	GET /routes.json   <dir>/routes.json
//	GET /authz.json    <dir>/authz.json
//
// Each request reads the file afresh, so publishing a new version is
// writing the file. A document's ETag is its top-level "version" in quotes
// ("7"); a request whose If-None-Match names it gets 304 Not Modified, which
// is what a node holding version 7 sends. A document whose version cannot
// be read (a typo, a half-saved file) is served without an ETag, so the
// node fetches it, rejects it with its reasons in the log, and keeps
// serving the previous one.
//
// New(dir) is an [http.Handler]; Listen is the shortcut that serves it on a
// loopback address in a goroutine the [Server] owns until Close.
//
// # Caveats
//
// The contents are served as they are: validating them is the node's job
// (or `scootgate check --routes FILE`). A document edited without raising
// its version is answered 304 to a node that holds that version, exactly as
// a real control plane must (an equal version means "no change", docs/snapshots.md),
// so the edit is not picked up.
//
// There is no authentication and no long poll (?wait= is ignored and
// answered at once, which the node handles). Listen refuses addresses that
// are not loopback.
package cpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The paths served, and the file each one reads from the directory.
const (
	RoutesPath = "/routes.json"
	AuthzPath  = "/authz.json"
)

// maxDocBytes bounds a served document: the node's own limit
// (snapshot.DefaultHTTPMaxBytes).
const maxDocBytes = 64 << 20

// ErrNotLoopback is returned by Listen for an address that is not on a
// loopback interface.
var ErrNotLoopback = errors.New("cpserver: address is not loopback")

// Handler serves the documents of one directory. Create it with New.
type Handler struct {
	dir string // immutable
}

// New returns a handler serving dir's routes.json and authz.json.
func New(dir string) *Handler { return &Handler{dir: dir} }

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var name string
	switch r.URL.Path {
	case RoutesPath, AuthzPath:
		name = strings.TrimPrefix(r.URL.Path, "/")
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	data, err := readDoc(filepath.Join(h.dir, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, name+" is not published", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "cannot read "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	if etag, ok := ETag(data); ok {
		w.Header().Set("ETag", etag)
		if matches(r.Header.Values("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data) // a client that went away retries at its next poll
}

func readDoc(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDocBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocBytes {
		return nil, fmt.Errorf("cpserver: %s is larger than %d bytes", path, maxDocBytes)
	}
	return data, nil
}

// ETag returns the entity tag of a document: its top-level "version" as a
// quoted decimal ("7"), the tag a node sends in If-None-Match. ok is false
// when the document has no readable unsigned integer version.
func ETag(doc []byte) (etag string, ok bool) {
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	if json.Unmarshal(doc, &head) != nil {
		return "", false
	}
	v, err := strconv.ParseUint(string(head.Version), 10, 64)
	if err != nil {
		return "", false
	}
	return `"` + strconv.FormatUint(v, 10) + `"`, true
}

// matches reports whether an If-None-Match field (RFC 9110 §13.1.2: "*" or
// a list of entity tags, compared weakly) matches etag.
func matches(fields []string, etag string) bool {
	for _, field := range fields {
		for tag := range strings.SplitSeq(field, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// Server serves a Handler on one loopback listener.
type Server struct {
	srv  *http.Server  // immutable
	addr string        // immutable
	done chan struct{} // closed when Serve returns
}

// Listen serves New(dir) on addr, which must be a loopback address such
// as "127.0.0.1:0", in a goroutine the Server owns until Close.
func Listen(addr, dir string) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("cpserver: listen: %w", err)
	}
	if !isLoopback(host) {
		return nil, fmt.Errorf("%w: %s", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cpserver: listen: %w", err)
	}
	// "localhost" is resolved by the system: check what was bound.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: %s bound %s", ErrNotLoopback, addr, ln.Addr())
	}
	s := &Server{
		srv: &http.Server{
			Handler:           New(dir),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return s, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr returns the listening address (host:port).
func (s *Server) Addr() string { return s.addr }

// URL returns the URL of a served path, such as s.URL(RoutesPath).
func (s *Server) URL(path string) string { return "http://" + s.addr + path }

// Close closes the listener and every connection, and waits for the serve
// loop to return.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if err != nil {
		return fmt.Errorf("cpserver: close: %w", err)
	}
	return nil
}
