package app

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMeasureH2RapidReset is a measurement, run by hand, never by make
// test: SCOOTGATE_MEASURE_FLOOD=1 go test -run 'TestMeasureH2RapidReset$'
// -v ./internal/app/. Client B (its own key, HTTP/2 over TLS on its own
// connection) sends one request every 5 ms, first alone, then while one
// connection of another key sends requests and resets each at once
// (RST_STREAM CANCEL) as fast as the node takes them in, connecting
// again whenever the node closes it; it logs B's latencies in both
// phases and what the flood got. SCOOTGATE_MEASURE_FLOOD_LIMITS adds
// [limits] keys (one per line).
func TestMeasureH2RapidReset(t *testing.T) {
	if os.Getenv("SCOOTGATE_MEASURE_FLOOD") == "" {
		t.Skip("a measurement: set SCOOTGATE_MEASURE_FLOOD=1 to run it")
	}
	const phase = 4 * time.Second
	cf, kf, pool := selfSigned(t)
	s := startStack(t, stackOptions{tlsCert: cf, tlsKey: kf, cap: 1000, limits: os.Getenv("SCOOTGATE_MEASURE_FLOOD_LIMITS")})
	addr := strings.TrimPrefix(s.api, "https://")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, anthropicModel)
	measure := func() []time.Duration {
		var (
			mu  sync.Mutex
			lat []time.Duration
			wg  sync.WaitGroup
		)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(phase); time.Now().Before(end); {
			start := <-tick.C
			wg.Go(func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/messages", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("x-api-key", limitedKey)
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("content-type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
					t.Errorf("B: %s %d", resp.Proto, resp.StatusCode)
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat
	}
	measure() // warm up
	base := measure()

	// The flooder connects again each time the node closes its
	// connection, as an attacker would.
	type result struct {
		streams, conns, refused int
		summary                 string
	}
	done := make(chan result)
	go func() {
		var r result
		fbody := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}]}`, openAIModel)
		for end := time.Now().Add(phase); time.Now().Before(end); {
			f, err := tryRapidReset(addr, pool)
			if err != nil {
				r.refused++ // closed at accept: connect again
				continue
			}
			r.conns++
			r.streams += f.flood(addr, "/v1/chat/completions", clientKey, fbody, time.Until(end), 10_000_000)
			f.close()
			r.summary = f.summary()
		}
		done <- r
	}()
	under := measure()
	r := <-done
	q := func(l []time.Duration, p float64) time.Duration { return l[int(float64(len(l)-1)*p)] }
	t.Logf("alone: %d requests, p50 %v, p99 %v; under the rapid reset: %d requests, p50 %v, p90 %v, p99 %v, max %v; flood: %d streams (%.0f/s) on %d connections (%d more closed at accept), the last: %s",
		len(base), q(base, 0.5), q(base, 0.99), len(under), q(under, 0.5), q(under, 0.9), q(under, 0.99), under[len(under)-1],
		r.streams, float64(r.streams)/phase.Seconds(), r.conns, r.refused, r.summary)
}
