package app

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureResetFlood is a measurement, run by hand, never by make
// test: SCOOTGATE_MEASURE_FLOOD=1 go test -run 'TestMeasureResetFlood$'
// -v ./internal/app/. Client B (127.0.0.1, its own key, keep-alive
// connections) sends one request every 5 ms, first alone, then while
// another process floods the node from 127.0.0.2 with HTTP/1.1
// connections that each send a request of another key and reset at
// once; it logs B's latencies in both phases, and the flood's
// connections, for each variant. Loopback only, 4 s per phase.
//
// SCOOTGATE_MEASURE_FLOOD_LIMITS lists the variants, ";" between them,
// each [limits] keys with "," between them; "null" aims the flood at a
// listener that closes every connection it accepts (the machine's own
// cost of the flood). SCOOTGATE_MEASURE_FLOOD_PROFILE=dir writes the
// node's CPU profile during each flood phase, and its log, there.
func TestMeasureResetFlood(t *testing.T) {
	if os.Getenv("SCOOTGATE_MEASURE_FLOOD") == "" {
		t.Skip("a measurement: set SCOOTGATE_MEASURE_FLOOD=1 to run it")
	}
	const phase = 4 * time.Second
	body := `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`
	variants := []string{"null", "max_unauthenticated_per_client = 0", "conn_rate_per_client = 20"}
	if v := os.Getenv("SCOOTGATE_MEASURE_FLOOD_LIMITS"); v != "" {
		variants = strings.Split(v, ";")
	}
	for i := range variants {
		variants[i] = strings.ReplaceAll(variants[i], ",", "\n") + "\n"
	}
	for i, limits := range variants {
		t.Run(strconv.Itoa(i)+":"+strings.TrimSpace(strings.ReplaceAll(limits, "\n", " ")), func(t *testing.T) {
			s := startStack(t, stackOptions{cap: 1000, limits: strings.TrimPrefix(limits, "null")})
			// B: open-loop, one request every 5 ms whatever the answers
			// take (a stall delays every request behind it, as it would a
			// real client's), on a pool of keep-alive connections.
			var fresh atomic.Int64 // B's requests that opened a new connection
			trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
				if !i.Reused {
					fresh.Add(1)
				}
			}}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
			defer client.CloseIdleConnections()
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
						req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", s.api+"/v1/chat/completions", strings.NewReader(body))
						if err != nil {
							t.Error(err)
							return
						}
						req.Header.Set("Authorization", "Bearer "+clientKey)
						resp, err := client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							t.Errorf("status %d", resp.StatusCode)
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
			measure() // warm the pool
			fresh.Store(0)
			base := measure()
			freshBase := fresh.Swap(0)

			target := strings.TrimPrefix(s.api, "http://")
			if strings.TrimSpace(limits) == "null" {
				// The floor: the flood aimed at a listener of this process
				// that closes every connection it accepts, as a perfect
				// bound would.
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						_ = c.Close()
					}
				}()
				target = ln.Addr().String()
			}
			flood := exec.Command(os.Args[0], "-test.run=^TestResetFlooder$", "-test.count=1")
			flood.Env = append(os.Environ(), "SCOOTGATE_FLOOD_TARGET="+target)
			out, err := flood.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := flood.Start(); err != nil {
				t.Fatal(err)
			}
			if dir := os.Getenv("SCOOTGATE_MEASURE_FLOOD_PROFILE"); dir != "" {
				f, err := os.Create(fmt.Sprintf("%s/flood%d.pprof", dir, i))
				if err != nil {
					t.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
			under := measure()
			_ = flood.Process.Signal(os.Interrupt)
			res, _ := io.ReadAll(out)
			_ = flood.Wait()
			if dir := os.Getenv("SCOOTGATE_MEASURE_FLOOD_PROFILE"); dir != "" {
				_ = os.WriteFile(fmt.Sprintf("%s/flood%d.log", dir, i), []byte(s.logs.String()), 0o644)
			}
			q := func(l []time.Duration, p float64) time.Duration { return l[int(float64(len(l)-1)*p)] }
			t.Logf("alone: %d requests (%d new connections), p50 %v, p99 %v, max %v; under the flood: %d requests (%d new connections), p50 %v, p90 %v, p99 %v, max %v; flood: %s",
				len(base), freshBase, q(base, 0.5), q(base, 0.99), base[len(base)-1],
				len(under), fresh.Load(), q(under, 0.5), q(under, 0.9), q(under, 0.99), under[len(under)-1], strings.TrimSpace(string(res)))
		})
	}
}

// TestResetFlooder is TestMeasureResetFlood's flooding process: 8
// goroutines open connections from 127.0.0.2 to SCOOTGATE_FLOOD_TARGET,
// each sending one request of the limited key and closing with a reset,
// until the process is interrupted; it prints what it did.
func TestResetFlooder(t *testing.T) {
	target := os.Getenv("SCOOTGATE_FLOOD_TARGET")
	if target == "" {
		t.Skip("TestMeasureResetFlood's child")
	}
	body := `{"model":"demo-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	req := fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: n\r\nx-api-key: %s\r\nanthropic-version: 2023-06-01\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", limitedKey, len(body), body)
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		opened  atomic.Int64
		refused atomic.Int64
	)
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			for !stop.Load() {
				c, err := d.Dial("tcp", target)
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
	stop.Store(true)
	wg.Wait()
	el := time.Since(start).Seconds()
	fmt.Printf("%d connections (%.0f/s), %d dials failed\n", opened.Load(), float64(opened.Load())/el, refused.Load())
}
