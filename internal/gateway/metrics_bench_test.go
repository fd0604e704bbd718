package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/tracing"
)

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreamMetrics measures the stream of BenchmarkStream through
// the handler, in one run: no metrics; the request and attempt metrics
// (Observer); those plus the per-model families fed by each attempt's
// usage event (Observer and Recorder, as the app wires them); and all of
// that with tracing on (every request sampled, spans exported to an
// in-process OTLP receiver). Besides ns/op it reports cpu-ns/op, the
// CPU time of the whole test process (client, handler, fake provider,
// receiver) per request: on a shared machine it moves less than wall
// time, and the differences between variants are what each costs.
func BenchmarkStreamMetrics(b *testing.B) {
	body := `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"[[chunks=20]]"}]}`
	m := metrics.New(metrics.Options{NoRuntime: true})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()
	tr := tracing.New(tracing.Options{Endpoint: collector.URL + "/v1/traces", SampleRatio: 1, Interval: 100 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	for _, v := range []struct {
		name  string
		o     Options
		trace bool
	}{
		{"off", Options{}, false},
		{"observer", Options{Observer: m}, false},
		{"observer+model", Options{Observer: m, Recorders: []Recorder{m}}, false},
		{"observer+model+traces", Options{Observer: m, Recorders: []Recorder{m}, Tracer: tr}, true},
	} {
		h, _ := newHandler(b, v.o)
		var handler http.Handler = h
		if v.trace { // as the app's middleware does
			handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q, ctx := tr.StartRequest(r, r.URL.Path)
				defer q.End(200, "")
				h.ServeHTTP(w, r.WithContext(ctx))
			})
		}
		srv := httptest.NewServer(handler)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(data, []byte("[DONE]")) {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, len(data))
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
		srv.Close()
	}
}
