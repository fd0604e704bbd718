package app

import (
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/provider/catalog"
	"github.com/scootgate/scootgate/internal/tracing"
)

// newTracer returns the trace exporter of [tracing], or nil when tracing
// is off (no endpoint).
func newTracer(cfg *config.Config, o Options) *tracing.Tracer {
	t := cfg.Tracing
	if t.Endpoint == "" {
		return nil
	}
	return tracing.New(tracing.Options{
		Endpoint: t.Endpoint, SampleRatio: t.SampleRatio, Interval: t.Interval,
		ServiceVersion: o.Version, NodeID: cfg.NodeID, Logger: o.Logger,
	})
}

// traceRoute names a request's route for its span: a client endpoint's
// fixed path (the endpoint's name when its path names the model), the
// same behind the platform of a cloud-native door ("bedrock
// /v1/messages"), /v1/models/{id}, or "other" (never the client's own
// path, which could hold anything). escaped is the path as sent, which
// doors read.
func traceRoute(path, escaped string) string {
	if spec, _ := catalog.ByPath(path); spec != nil {
		return spec.Route()
	}
	if spec, platform := catalog.ByDoor(escaped); spec != nil {
		return platform + " " + spec.Route()
	}
	switch {
	case path == "/v1/models":
		return path
	case strings.HasPrefix(path, "/v1/models/"):
		return "/v1/models/{id}"
	}
	return "other"
}

// traced starts a request span around next (the gateway handler), which adds the
// attempts' spans through its Tracer option, and ends it with the status
// sent and the node's request id.
func traced(next http.Handler, t *tracing.Tracer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, ctx := t.StartRequest(r, traceRoute(r.URL.Path, r.URL.EscapedPath()))
		if q == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &spanWriter{ResponseWriter: w}
		defer func() { q.End(sw.status, w.Header().Get("X-Request-Id")) }()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// spanWriter remembers the status sent, for the request span.
type spanWriter struct {
	http.ResponseWriter
	status int
}

func (s *spanWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *spanWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (flush, deadlines) reach the
// server's writer.
func (s *spanWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
