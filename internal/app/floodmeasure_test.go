package app

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureResetFlood is a measurement, run by hand, never by make
// test: SCOOTGATE_MEASURE_FLOOD=1 go test -run 'TestMeasureResetFlood$'
// -v ./internal/app/. One client (127.0.0.1, one keep-alive connection)
// sends requests one after the other, first alone, then while another
// address (127.0.0.2) floods the node with HTTP/1.1 connections that each
// send a request and reset at once; it logs the first client's p50 and
// p99 in both phases, and the flood's connections, with and without
// limits.max_conns_per_client. Loopback only, a few seconds per phase.
func TestMeasureResetFlood(t *testing.T) {
	if os.Getenv("SCOOTGATE_MEASURE_FLOOD") == "" {
		t.Skip("a measurement: set SCOOTGATE_MEASURE_FLOOD=1 to run it")
	}
	const phase, flooders = 4 * time.Second, 8
	body := `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`
	for _, per := range []int{0, 16} {
		t.Run(fmt.Sprintf("max_conns_per_client=%d", per), func(t *testing.T) {
			s := startStack(t, stackOptions{cap: 1000, limits: fmt.Sprintf("max_conns_per_client = %d\n", per)})
			measure := func() []time.Duration {
				var lat []time.Duration
				for end := time.Now().Add(phase); time.Now().Before(end); {
					start := time.Now()
					if r := s.do("POST", "/v1/chat/completions", bearer(clientKey), body); r.status != 200 {
						t.Fatalf("status %d", r.status)
					}
					lat = append(lat, time.Since(start))
				}
				slices.Sort(lat)
				return lat
			}
			base := measure()

			req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: n\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", clientKey, len(body), body)
			api := strings.TrimPrefix(s.api, "http://")
			var (
				stop    atomic.Bool
				wg      sync.WaitGroup
				opened  atomic.Int64
				refused atomic.Int64
			)
			for range flooders {
				wg.Go(func() {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
					for !stop.Load() {
						c, err := d.Dial("tcp", api)
						if err != nil {
							refused.Add(1)
							continue
						}
						opened.Add(1)
						_, _ = c.Write([]byte(req))
						_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
						_ = c.Close()
					}
				})
			}
			under := measure()
			stop.Store(true)
			wg.Wait()
			q := func(l []time.Duration, p float64) time.Duration { return l[int(float64(len(l)-1)*p)] }
			t.Logf("alone: %d requests, p50 %v, p99 %v; under the flood: %d requests, p50 %v, p99 %v; flood: %d connections (%.0f/s), %d dials failed",
				len(base), q(base, 0.5), q(base, 0.99), len(under), q(under, 0.5), q(under, 0.99),
				opened.Load(), float64(opened.Load())/phase.Seconds(), refused.Load())
		})
	}
}
