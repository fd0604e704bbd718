package snapshot_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/snapshot"
)

// token is the bearer token the test control plane expects. It must never
// appear in an error, a log line or Status.
const token = "cp-token-hunter2"

// controlPlane is a test control plane: it serves one document per
// version with ETag "<version>" and answers If-None-Match with 304, like
// a real one should (docs/snapshots.md). Handler overrides the behaviour.
type controlPlane struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	version  uint64
	doc      []byte
	requests []*http.Request // clones, in order
	handler  http.HandlerFunc
}

func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	cp := &controlPlane{t: t}
	cp.srv = httptest.NewServer(http.HandlerFunc(cp.serve))
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *controlPlane) publish(version uint64, doc string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.version, cp.doc = version, []byte(doc)
}

func (cp *controlPlane) setHandler(h http.HandlerFunc) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.handler = h
}

func (cp *controlPlane) serve(w http.ResponseWriter, r *http.Request) {
	cp.mu.Lock()
	cp.requests = append(cp.requests, r.Clone(r.Context()))
	version, doc, h := cp.version, cp.doc, cp.handler
	cp.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if h != nil {
		h(w, r)
		return
	}
	etag := `"` + strconv.FormatUint(version, 10) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

func (cp *controlPlane) lastRequest() *http.Request {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.requests) == 0 {
		cp.t.Fatal("no request reached the control plane")
	}
	return cp.requests[len(cp.requests)-1]
}

func (cp *controlPlane) source(t *testing.T, path string, o snapshot.HTTPOptions) *snapshot.HTTPSource {
	t.Helper()
	if o.Token.IsZero() {
		o.Token = secret.New(token)
	}
	u, err := url.Parse(cp.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.NewHTTPSource(u, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func TestHTTPSourceConditionalGET(t *testing.T) {
	cp := newControlPlane(t)
	src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{})
	type step struct {
		Result      fetchResult
		IfNoneMatch string
	}
	steps := []struct {
		name string
		do   func()
		want step
	}{
		{"first fetch is unconditional", func() { cp.publish(5, "doc-5") }, step{fetchResult{"doc-5", true}, ""}},
		{"no version set: fetched again, same bytes are unchanged", func() {}, step{fetchResult{"", false}, ""}},
		{"version set: 304 is unchanged", func() { src.SetVersion(5) }, step{fetchResult{"", false}, `"5"`}},
		{"new version: 200 is changed", func() { cp.publish(6, "doc-6") }, step{fetchResult{"doc-6", true}, `"5"`}},
		{"forget: unconditional, reported again", func() { src.Forget() }, step{fetchResult{"doc-6", true}, ""}},
		{
			"server ignores If-None-Match: same bytes are unchanged",
			func() {
				src.SetVersion(6)
				cp.setHandler(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "doc-6") })
			},
			step{fetchResult{"", false}, `"6"`},
		},
	}
	for _, st := range steps {
		st.do()
		got := step{fetch(t, src), cp.lastRequest().Header.Get("If-None-Match")}
		if diff := cmp.Diff(got, st.want); diff != "" {
			t.Fatalf("%s: mismatch (-got +want):\n%s", st.name, diff)
		}
	}
	r := cp.lastRequest()
	if diff := cmp.Diff([]string{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept")},
		[]string{"GET", "/v1/routes", "Bearer " + token, "application/json"}); diff != "" {
		t.Errorf("request mismatch (-got +want):\n%s", diff)
	}
}

// TestHTTPSourceLongPoll: wait=<seconds> and keepalive=<seconds> are
// appended to the configured query, and a held request is answered
// normally.
func TestHTTPSourceLongPoll(t *testing.T) {
	cp := newControlPlane(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release // a long poll: held until the document changes
		_, _ = io.WriteString(w, "doc")
	})
	src := cp.source(t, "/v1/routes?node=a%20b", snapshot.HTTPOptions{LongPoll: 2500 * time.Millisecond})
	done := make(chan fetchResult)
	go func() { done <- fetch(t, src) }()
	<-arrived
	close(release)
	if diff := cmp.Diff(<-done, fetchResult{"doc", true}); diff != "" {
		t.Errorf("fetch mismatch (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(cp.lastRequest().URL.RawQuery, "node=a%20b&wait=2&keepalive=5"); diff != "" {
		t.Errorf("query mismatch (-got +want):\n%s", diff)
	}
}

// TestHTTPSourceHeld: a long-poll request says "Prefer: wait=N,
// keepalive=K" (N capped at the 10 s silence bound: this control plane
// never announces keepalive), and
// Held reports whether the server answered "Preference-Applied: wait=N"
// (so the poller asks again at once) on a 200 or a 304; a server that
// ignores the wait, or an error, is not "held".
func TestHTTPSourceHeld(t *testing.T) {
	cp := newControlPlane(t)
	cp.publish(3, "doc-3")
	var applied atomic.Value
	applied.Store("")
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if v := applied.Load().(string); v != "" {
			w.Header().Set("Preference-Applied", v)
		}
		if r.Header.Get("If-None-Match") == `"3"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, "doc-3")
	})
	src := cp.source(t, "/v1/routes", snapshot.HTTPOptions{LongPoll: 30 * time.Second})
	for _, st := range []struct {
		name, header string
		version      uint64
		want         bool
	}{
		{"200, held", "wait=30", 0, true},
		{"304, held", "wait=30", 3, true},
		{"304, among other preferences", "return=minimal, wait=12", 3, true},
		{"304, not held (a static server)", "", 3, false},
		{"other preference only", "return=minimal", 3, false},
	} {
		applied.Store(st.header)
		if st.version == 0 {
			src.Forget()
		} else {
			src.SetVersion(st.version)
		}
		fetch(t, src)
		if got := src.Held(); got != st.want {
			t.Errorf("%s: Held = %v, want %v", st.name, got, st.want)
		}
		if got := cp.lastRequest().Header.Get("Prefer"); got != "wait=10, keepalive=5" {
			t.Errorf("%s: Prefer = %q, want wait=10, keepalive=5", st.name, got)
		}
	}
	applied.Store("wait=30")
	cp.setHandler(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Preference-Applied", "wait=30")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	})
	if _, _, err := src.Fetch(t.Context()); err == nil || src.Held() {
		t.Errorf("503: err %v, Held %v; want an error and not held", err, src.Held())
	}
	// Without LongPoll there is no Prefer header and nothing is held.
	plain := cp.source(t, "/v1/routes", snapshot.HTTPOptions{})
	_, _, _ = plain.Fetch(t.Context())
	if cp.lastRequest().Header.Get("Prefer") != "" || plain.Held() {
		t.Error("a source without long poll sent Prefer or reports Held")
	}
}

// rawServer answers every connection with the bytes resp and then closes,
// or holds it open until the test ends when hold is set. It is how a
// control plane that dies mid-body looks from the node (A16).
func rawServer(t *testing.T, resp string, hold bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(done)
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, resp)
				if hold {
					<-done
				}
			})
		}
	})
	return "http://" + ln.Addr().String() + "/v1/routes"
}

func sourceFor(t *testing.T, rawURL string, o snapshot.HTTPOptions) *snapshot.HTTPSource {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.NewHTTPSource(u, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func TestHTTPSourceNeverHalfADocument(t *testing.T) {
	const body = `{"schema":1,"version":2,"backends":[`
	tests := []struct {
		name    string
		resp    string
		hold    bool
		wantErr error  // errors.Is target, or nil
		want    string // error fragment
		// data is returned, but only complete as sent: a close-delimited
		// body cannot be told from a complete one here, and the decoder
		// rejects it as truncated JSON (see TestPollerTruncatedDocument).
		wantData string
	}{
		{
			name:    "content-length body cut short",
			resp:    "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body,
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "chunked body without its last chunk",
			resp:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n", len(body), body),
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:     "close-delimited body cut short",
			resp:     "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
			wantData: body,
		},
		{
			name:    "slow body: deadline",
			resp:    "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body,
			hold:    true,
			wantErr: context.DeadlineExceeded,
		},
		{
			name:    "no response headers: deadline",
			hold:    true,
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sourceFor(t, rawServer(t, tt.resp, tt.hold), snapshot.HTTPOptions{Timeout: 200 * time.Millisecond})
			data, changed, err := src.Fetch(t.Context())
			if tt.wantErr == nil {
				if err != nil || !changed || string(data) != tt.wantData {
					t.Fatalf("Fetch = %q, %v, %v; want %q, true, nil", data, changed, err, tt.wantData)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Fetch error = %v, want %v", err, tt.wantErr)
			}
			if data != nil || changed {
				t.Errorf("Fetch returned %q, %v with an error", data, changed)
			}
		})
	}
}

func TestHTTPSourceTooLarge(t *testing.T) {
	for name, resp := range map[string]string{
		"declared": "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n0123456789a",
		"chunked":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n0123456789a\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			src := sourceFor(t, rawServer(t, resp, false), snapshot.HTTPOptions{MaxBytes: 10})
			if _, _, err := src.Fetch(t.Context()); !errors.Is(err, snapshot.ErrTooLarge) {
				t.Fatalf("Fetch error = %v, want ErrTooLarge", err)
			}
		})
	}
	src := sourceFor(t, rawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", false), snapshot.HTTPOptions{MaxBytes: 10})
	if diff := cmp.Diff(fetch(t, src), fetchResult{"0123456789", true}); diff != "" {
		t.Errorf("at the limit (-got +want):\n%s", diff)
	}
}

func TestHTTPSourceStatus(t *testing.T) {
	cp := newControlPlane(t)
	var redirected atomic.Bool
	cp.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		if r.URL.Path == "/elsewhere" {
			redirected.Store(true)
		}
		http.Error(w, "boom "+token, http.StatusInternalServerError) // a body is never quoted
	})
	tests := []struct {
		name string
		src  *snapshot.HTTPSource
		code int
	}{
		{"wrong token", cp.source(t, "/x", snapshot.HTTPOptions{Token: secret.New("wrong")}), http.StatusUnauthorized},
		{"server error", cp.source(t, "/x", snapshot.HTTPOptions{}), http.StatusInternalServerError},
		{"redirect is not followed", cp.source(t, "/redirect", snapshot.HTTPOptions{}), http.StatusFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := tt.src.Fetch(t.Context())
			var se *snapshot.HTTPStatusError
			if !errors.As(err, &se) || se.Code != tt.code {
				t.Fatalf("Fetch error = %v, want an HTTPStatusError with code %d", err, tt.code)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "boom") {
				t.Errorf("error %q carries the token or the body", err)
			}
		})
	}
	if redirected.Load() {
		t.Error("the redirect was followed")
	}

	// A 304 to a request that asked for none is a protocol error.
	cp.setHandler(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) })
	if _, _, err := cp.source(t, "/x", snapshot.HTTPOptions{}).Fetch(t.Context()); err == nil || !strings.Contains(err.Error(), "unconditional") {
		t.Errorf("unsolicited 304: error = %v", err)
	}
}

// TestHTTPSourceErrorsHideSecrets: neither the token nor the query (which
// may carry a signature) appears in any error.
func TestHTTPSourceErrorsHideSecrets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // connection refused from now on

	sources := map[string]string{
		"refused":  "http://" + dead + "/v1/routes?sig=hunter2",
		"timeout":  rawServer(t, "", true) + "?sig=hunter2",
		"bad HTTP": rawServer(t, "SSH-2.0-OpenSSH_9.2\r\n", false) + "?sig=hunter2",
	}
	for name, raw := range sources {
		t.Run(name, func(t *testing.T) {
			src := sourceFor(t, raw, snapshot.HTTPOptions{Token: secret.New(token), Timeout: 100 * time.Millisecond})
			_, _, err := src.Fetch(t.Context())
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "sig=") {
				t.Errorf("error %q carries a secret", err)
			}
			if !strings.Contains(err.Error(), "/v1/routes") {
				t.Errorf("error %q does not name the source", err)
			}
		})
	}
}

func TestHTTPSourceTLS(t *testing.T) {
	var (
		mu        sync.Mutex
		peerCerts int
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peerCerts = len(r.TLS.PeerCertificates)
		mu.Unlock()
		_, _ = io.WriteString(w, "doc")
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failing cases are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	client := clientCert(t)

	tests := []struct {
		name    string
		tls     *tls.Config
		wantErr string
	}{
		{"untrusted server certificate", &tls.Config{Certificates: []tls.Certificate{client}}, "certificate"},
		{"no client certificate", &tls.Config{RootCAs: roots}, "certificate"},
		{"CA and client certificate", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sourceFor(t, srv.URL+"/v1/routes", snapshot.HTTPOptions{TLS: tt.tls})
			_, _, err := src.Fetch(t.Context())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Fetch error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if peerCerts != 1 {
				t.Errorf("server saw %d client certificates, want 1", peerCerts)
			}
		})
	}
}

// clientCert returns a self-signed client certificate.
func clientCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "scootgate-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestNewHTTPSourceRejects(t *testing.T) {
	for _, raw := range []string{
		"ftp://cp/x", "https:///x", "https://u:hunter2@cp/x", "https://cp/x#frag", "http://cp.example.com/x", "http://10.0.0.1/x",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = snapshot.NewHTTPSource(u, snapshot.HTTPOptions{})
		if !errors.Is(err, snapshot.ErrUnsupportedSource) {
			t.Errorf("NewHTTPSource(%q) error = %v, want ErrUnsupportedSource", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q repeats the URL", err)
		}
	}
}
