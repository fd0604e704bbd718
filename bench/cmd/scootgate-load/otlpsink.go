package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// otlpSink is the collector of the "node, tracing on" variant: it accepts
// OTLP/HTTP trace exports on loopback, answers 200 and counts them. It
// decodes nothing, so what the node spends on tracing is not hidden behind
// a slow collector. It runs in the harness's own process, on the side CPU.
type otlpSink struct {
	srv      *http.Server
	ln       net.Listener
	requests atomic.Int64
	bytes    atomic.Int64
	refused  atomic.Int64 // anything but POST /v1/traces
}

// startOTLPSink listens on a kernel-chosen loopback port.
func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.refused.Add(1)
		}
	}()
	return s, nil
}

// url is the traces endpoint for the node's [tracing] endpoint.
func (s *otlpSink) url() string { return "http://" + s.ln.Addr().String() + "/v1/traces" }

func (s *otlpSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		s.refused.Add(1)
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	n, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 64<<20))
	if err != nil {
		s.refused.Add(1)
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.requests.Add(1)
	s.bytes.Add(n)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}")
}

// counts returns what the sink has accepted so far.
func (s *otlpSink) counts() traceFinding {
	return traceFinding{Exports: s.requests.Load(), Bytes: s.bytes.Load(), Refused: s.refused.Load()}
}

func (s *otlpSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx) //nolint:errcheck // best effort at the end of a run
}

// traceFinding is what the node with tracing on exported during the rounds.
type traceFinding struct {
	Exports int64 `json:"export_requests"`
	Bytes   int64 `json:"export_bytes"`
	Refused int64 `json:"refused_requests"` // wrong method/path or unreadable body
}
