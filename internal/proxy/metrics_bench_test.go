package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/metrics"
)

// BenchmarkStreamMetrics measures the stream of BenchmarkStream through
// the handler three ways in one run: no metrics; the request and attempt
// metrics (Observer); and those plus the per-model families fed by each
// attempt's usage event (Observer and Recorder, as the app wires them
// when usage events are off). The ratios are what the metrics cost on
// the request path.
func BenchmarkStreamMetrics(b *testing.B) {
	body := `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"[[chunks=20]]"}]}`
	m := metrics.New(metrics.Options{NoRuntime: true})
	for _, v := range []struct {
		name string
		o    Options
	}{
		{"off", Options{}},
		{"observer", Options{Observer: m}},
		{"observer+model", Options{Observer: m, Recorder: m}},
	} {
		h, _ := newHandler(b, v.o)
		srv := httptest.NewServer(h)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
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
		})
		srv.Close()
	}
}
