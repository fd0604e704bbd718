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
// writing the file (best by writing a temporary file and renaming it over
// the old one). A document's ETag is its "version" in quotes ("7"), read
// from the payload when the file is a signed envelope (pkg/snapsign); a
// request whose If-None-Match names it gets 304 Not Modified, which is
// what a node holding version 7 sends. A document whose version cannot be
// read (a typo, a half-saved file) is served without an ETag, so the node
// fetches it, rejects it with its reasons in the log, and keeps serving
// the previous one.
//
// # Long poll
//
// A GET with ?wait=N (whole seconds, capped at [MaxWait]) whose
// If-None-Match names the current version is held: the handler watches
// the file (every [CheckEvery]) and answers 200 with the new document as
// soon as its version changes, or 304 after N seconds. Both answers of a
// held request carry "Preference-Applied: wait=N", which tells the node
// to ask again at once (proto/control-plane.md "Long-poll"). A request
// that does not name the current version is answered at once.
//
// A held request that also asks for ?keepalive=K (whole seconds) is
// answered 200 at once, with "Preference-Applied: wait=N, keepalive=K",
// and a newline is written and flushed every K seconds (capped at
// [MaxKeepalive]) while it is held; the body then ends with the new
// document, or with nothing when the hold ends unchanged, which the node
// reads as a 304 (proto/control-plane.md "Keepalive").
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
// There is no authentication. Listen refuses addresses that are not
// loopback. A file is read again only when its identity, size or
// modification time changes, so an in-place rewrite of the same size
// within one timestamp tick can be missed; publish by rename. Watching is a stat of the file per held request every
// CheckEvery: plenty for a dev fleet, not how a production control plane
// should notice a publish.
package cpserver

import (
	"context"
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
	"sync"
	"time"

	"github.com/scootgate/scootgate/pkg/snapsign"
)

// The paths served, and the file each one reads from the directory.
const (
	RoutesPath = "/routes.json"
	AuthzPath  = "/authz.json"
)

// Long-poll limits.
const (
	// MaxWait caps ?wait=N: a longer wait is held this long.
	MaxWait = 60 * time.Second
	// CheckEvery is how often a held request looks at its file.
	CheckEvery = 20 * time.Millisecond
	// MaxKeepalive caps ?keepalive=K.
	MaxKeepalive = 30 * time.Second
)

// maxDocBytes bounds a served document: the node's own limit
// (snapshot.DefaultHTTPMaxBytes).
const maxDocBytes = 64 << 20

// ErrNotLoopback is returned by Listen for an address that is not on a
// loopback interface.
var ErrNotLoopback = errors.New("cpserver: address is not loopback")

// Handler serves the documents of one directory. Create it with New.
type Handler struct {
	dir    string // immutable
	onHold func() // immutable; tests: called when a request starts to be held

	mu    sync.Mutex
	cache map[string]*doc // guarded by mu; by path: the last read of each file
}

// doc is one read of a served file. Held requests share it, so that a
// publish is read and its ETag computed once, not once per waiting node.
type doc struct {
	data   []byte
	fi     os.FileInfo // the file as it was read
	etag   string
	tagged bool // etag is valid (the version could be read)
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
	path := filepath.Join(h.dir, name)
	d, err := h.read(path)
	if wait := waitParam(r); wait > 0 && r.Method == http.MethodGet && err == nil {
		if d.tagged && matches(r.Header.Values("If-None-Match"), d.etag) {
			if h.onHold != nil {
				h.onHold()
			}
			if every := keepaliveParam(r); every > 0 {
				h.holdKeepalive(w, r, path, d, wait, every)
				return
			}
			d, err = h.hold(r.Context(), path, d, wait, 0, nil)
			if r.Context().Err() != nil {
				return // the node went away, or the server is closing
			}
			w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(wait/time.Second)))
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, name+" is not published", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "cannot read "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	if d.tagged {
		w.Header().Set("ETag", d.etag)
		if matches(r.Header.Values("If-None-Match"), d.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(d.data)))
	_, _ = w.Write(d.data) // a client that went away retries at its next poll
}

// holdKeepalive is a held request with keepalive: 200 at once, a newline
// every every while held, then the new document or nothing (unchanged).
// A file that cannot be read any more aborts the answer, which the node
// counts as a failed poll.
func (h *Handler) holdKeepalive(w http.ResponseWriter, r *http.Request, path string, cur *doc, wait, every time.Duration) {
	w.Header().Set("Preference-Applied", fmt.Sprintf("wait=%d, keepalive=%d", wait/time.Second, every/time.Second))
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "application/json")
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	d, err := h.hold(r.Context(), path, cur, wait, every, func() {
		_, _ = io.WriteString(w, "\n")
		_ = rc.Flush()
	})
	switch {
	case r.Context().Err() != nil:
		return
	case err != nil:
		panic(http.ErrAbortHandler)
	case d != cur && d.etag != cur.etag:
		_, _ = w.Write(d.data)
	}
}

// keepaliveParam returns the ?keepalive= of r, capped at MaxKeepalive; 0
// when absent or not a positive whole number (no keepalive).
func keepaliveParam(r *http.Request) time.Duration {
	n, err := strconv.ParseUint(r.URL.Query().Get("keepalive"), 10, 32)
	if err != nil || n == 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, MaxKeepalive)
}

// waitParam returns the ?wait= of r, capped at MaxWait; 0 when absent or
// not a positive whole number (answered at once, as a static server
// would).
func waitParam(r *http.Request) time.Duration {
	n, err := strconv.ParseUint(r.URL.Query().Get("wait"), 10, 32)
	if err != nil || n == 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, MaxWait)
}

// hold waits until the version of the file at path is no longer cur's,
// or wait has passed, or ctx ends, and returns the document to answer
// with: the new one, or cur (then If-None-Match still matches: 304). A file
// that cannot be read any more ends the hold with the error. With every
// above 0, keepalive is called every that long while it waits.
func (h *Handler) hold(ctx context.Context, path string, cur *doc, wait, every time.Duration, keepalive func()) (*doc, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	var alive <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		alive = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return cur, nil
		case <-alive:
			keepalive()
			continue
		case <-tick.C:
		}
		next, err := h.read(path)
		if err != nil {
			return nil, err
		}
		if !next.tagged || next.etag != cur.etag {
			return next, nil
		}
		// Untouched, or rewritten with the same version: no change for
		// the node.
	}
}

// read returns the document at path: the cached read while the file is
// unchanged (same file, size and modification time), else a fresh one.
func (h *Handler) read(path string) (*doc, error) {
	fi, statErr := os.Stat(path)
	h.mu.Lock()
	c := h.cache[path]
	h.mu.Unlock()
	if statErr == nil && c != nil && os.SameFile(fi, c.fi) && fi.Size() == c.fi.Size() && fi.ModTime().Equal(c.fi.ModTime()) {
		return c, nil
	}
	data, st, err := readDoc(path)
	if err != nil {
		return nil, err
	}
	d := &doc{data: data, fi: st}
	d.etag, d.tagged = ETag(data)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cache == nil {
		h.cache = map[string]*doc{}
	}
	h.cache[path] = d
	return d, nil
}

// readDoc reads a document and returns the file's state as it was read.
func readDoc(path string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxDocBytes {
		return nil, nil, fmt.Errorf("cpserver: %s is larger than %d bytes", path, maxDocBytes)
	}
	return data, fi, nil
}

// ETag returns the entity tag of a document: its top-level "version" as a
// quoted decimal ("7"), the tag a node sends in If-None-Match; for a
// signed envelope (pkg/snapsign), the version of its payload, whose
// signature is not checked here. ok is false when the document has no
// readable unsigned integer version.
func ETag(doc []byte) (etag string, ok bool) {
	if snapsign.IsEnvelope(doc) {
		e, err := snapsign.Decode(doc)
		if err != nil {
			return "", false
		}
		if doc, err = e.Unwrap(e.PayloadType); err != nil {
			return "", false
		}
	}
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
