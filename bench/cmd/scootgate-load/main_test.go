package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
)

// TestNodeConfigLoads keeps the generated config in step with the config
// package: every variant must load through config.Load, with relative
// paths resolved against its directory.
func TestNodeConfigLoads(t *testing.T) {
	t.Setenv(providerKeyEnv, "k")
	tests := []struct {
		name       string
		setup      nodeSetup
		wantUsage  bool
		wantBroker string
		wantCommit time.Duration
		wantTrace  string
		wantFirst  time.Duration // timeouts.first_byte
		wantBatch  int           // mqtt.batch_max
	}{
		{"broker up", nodeSetup{Broker: "127.0.0.1:1883", Usage: true}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, "", 60 * time.Second, 1},
		{"usage off", nodeSetup{Usage: false}, false, "", 100 * time.Millisecond, "", 60 * time.Second, 1},
		{"outbox on tmpfs", nodeSetup{Broker: "127.0.0.1:1883", Usage: true, OutboxPath: "/dev/shm/x/node-outbox-tmpfs.db"}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, "", 60 * time.Second, 1},
		{"connect egress", nodeSetup{Egress: "http://127.0.0.1:3128", Usage: true}, true, "", 100 * time.Millisecond, "", 60 * time.Second, 1},
		{"commit interval", nodeSetup{Usage: true, CommitInterval: 100 * time.Millisecond}, true, "", 100 * time.Millisecond, "", 60 * time.Second, 1},
		{"first byte", nodeSetup{Usage: true, FirstByte: time.Second}, true, "", 100 * time.Millisecond, "", time.Second, 1},
		{"batched usage", nodeSetup{Broker: "127.0.0.1:1883", Usage: true, BatchMax: batchedMax}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, "", 60 * time.Second, batchedMax},
		{"tracing on", nodeSetup{Broker: "127.0.0.1:1883", Usage: true, Tracing: "http://127.0.0.1:4318/v1/traces"}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, "http://127.0.0.1:4318/v1/traces", 60 * time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := tt.setup
			s.NodeID, s.Provider = "load-test", "http://127.0.0.1:18080"
			if s.Egress == "" {
				s.Egress = "socks5://127.0.0.1:1080"
			}
			path, err := writeNodeDir(dir, s)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("generated config does not load: %v\n%s", err, nodeTOML(s))
			}
			wantRatio, wantInterval := 1.0, 5*time.Second // the shipped defaults
			if tt.wantTrace != "" {
				wantInterval = 100 * time.Millisecond
			}
			got := []any{cfg.Usage.Enabled, cfg.MQTT.Broker, cfg.Egress.Proxies[0].URL.String(), cfg.Authz.Source, cfg.Usage.CommitInterval,
				cfg.Tracing.Endpoint, cfg.Tracing.SampleRatio, cfg.Tracing.Interval, cfg.Timeouts.FirstByte, cfg.MQTT.BatchMax}
			want := []any{tt.wantUsage, tt.wantBroker, s.Egress, "file:" + dir + "/authz.json", tt.wantCommit,
				tt.wantTrace, wantRatio, wantInterval, tt.wantFirst, tt.wantBatch}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("usage, broker, egress, authz, commit interval, tracing endpoint, ratio, interval, first byte, batch max (-got +want):\n%s", diff)
			}
			wantOutbox := s.OutboxPath
			if wantOutbox == "" {
				wantOutbox = dir + "/outbox.db"
			}
			if cfg.Usage.OutboxPath != wantOutbox {
				t.Errorf("usage.outbox_path = %q, want %q", cfg.Usage.OutboxPath, wantOutbox)
			}
		})
	}
}

func TestAllowedCPUs(t *testing.T) {
	tests := []struct {
		status string
		want   []int
	}{
		{"Name:\tx\nCpus_allowed_list:\t0-1\n", []int{0, 1}},
		{"Cpus_allowed_list:\t0,2-3,7\n", []int{0, 2, 3, 7}},
		{"Cpus_allowed_list:\t3\n", []int{3}},
		{"Cpus_allowed_list:\t3-1\n", nil},
		{"Name:\tx\n", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(allowedCPUs(tt.status), tt.want); diff != "" {
			t.Errorf("allowedCPUs(%q) (-got +want):\n%s", tt.status, diff)
		}
	}
}

// TestBaselineTunnels checks that the baseline's dialers really go through
// each egress proxy (so it pays the same tunnel as the node).
func TestBaselineTunnels(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	defer provider.Close()
	socks, socksAddr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer socks.Close()
	conn, connectAddr, err := connectproxy.Listen("127.0.0.1:0", connectproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	tests := []struct {
		egress  string
		tunnels func() int64
	}{
		{"socks5://" + socksAddr, socks.Tunnels},
		{"http://" + connectAddr, conn.Tunnels},
	}
	for _, tt := range tests {
		t.Run(tt.egress, func(t *testing.T) {
			dial, err := egressDialer(tt.egress)
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{DialContext: dial}}
			defer client.CloseIdleConnections()
			before := tt.tunnels()
			resp, err := client.Get(provider.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "hello" || tt.tunnels()-before != 1 {
				t.Fatalf("body %q, tunnels opened %d; want hello through one tunnel", body, tt.tunnels()-before)
			}
		})
	}
}

func TestConnectRefused(t *testing.T) {
	conn, addr, err := connectproxy.Listen("127.0.0.1:0", connectproxy.Options{Allow: func(string, int) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := connectDial(addr)(ctx, "tcp", "127.0.0.1:9"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("err = %v, want a refused CONNECT", err)
	}
}

// TestBaselineFirstByte: with -first-byte, the baseline gives up on a
// provider without response headers within the limit and answers 504, as
// the node does; a provider that answers in time passes.
func TestBaselineFirstByte(t *testing.T) {
	release := make(chan struct{})
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done(): // the baseline gave up
			case <-release:
			}
			return
		}
		_, _ = io.WriteString(w, "hello")
	}))
	defer provider.Close()
	defer close(release)
	conn, connectAddr, err := connectproxy.Listen("127.0.0.1:0", connectproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rp, err := newBaselineProxy(provider.URL, "http://"+connectAddr, "k", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	hop := httptest.NewServer(rp)
	defer hop.Close()
	client := newClient()
	defer client.CloseIdleConnections()
	for _, tt := range []struct {
		path     string
		wantCode int
	}{
		{"/fast", http.StatusOK},
		{"/slow", http.StatusGatewayTimeout},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hop.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantCode {
			t.Errorf("%s: status %d, want %d", tt.path, resp.StatusCode, tt.wantCode)
		}
	}
}

// TestChecks feeds the report two rounds of measured runs and checks the
// ratios, per-round spreads, verdicts and notes it derives.
func TestChecks(t *testing.T) {
	o := options{delay: time.Millisecond, eventGap: 5 * time.Millisecond, rounds: 2,
		paths: []string{pathOpenAI}, rates: []float64{500}, streamRates: []float64{200}}
	r := newReport(o, pinning{}, sutRuntime{})
	p := apiPaths[pathOpenAI]
	ns, st := scenarioName(p, false, 500), scenarioName(p, true, 200)
	const ms, n = time.Millisecond, 10
	// run is one round's sample: n shots with these timings, cpu per
	// shot, and side CPU over a 1 s run.
	run := func(cpu time.Duration, latency, ttfb, gap time.Duration, side float64) sample {
		shots := make([]loadgen.Shot, n)
		for i := range shots {
			shots[i] = loadgen.Shot{Latency: latency, TTFB: ttfb}
			if gap > 0 {
				shots[i].Gaps = []time.Duration{gap, gap}
			}
		}
		return sample{res: loadgen.Result{Shots: shots}, cpu: n * cpu, sent: n, wall: time.Second,
			side: time.Duration(side * float64(time.Second))}
	}
	µs := time.Microsecond
	for round := range 2 {
		add := func(sc, target string, s sample) {
			r.add(sc, pathOpenAI, map[string]float64{ns: 500, st: 200}[sc], sc == st, target, s, 0)
		}
		// CPU per request: baseline 100, 120 µs; node 110, 150 µs (1.10×,
		// 1.25×; pooled 130 ÷ 110); broker down 108, 146 µs (+2, +4 µs).
		// Added latency: node 3 - 1 ms vs baseline 2 - 1 ms: 2×.
		add(ns, keyBaseline, run([]time.Duration{100 * µs, 120 * µs}[round], 2*ms, 0, 0, 0.3))
		add(ns, keyNode, run([]time.Duration{110 * µs, 150 * µs}[round], 3*ms, 0, 0, 0.3))
		add(ns, keyBrokerDown, run([]time.Duration{108 * µs, 146 * µs}[round], 3*ms, 0, 0, 0.3))
		add(ns, keyTracing, run([]time.Duration{165 * µs, 225 * µs}[round], 3*ms, 0, 0, 0.3))
		// Usage events off: 95, 130 µs (events +15, +20 µs; on ÷ off
		// 1.16, 1.15); outbox on tmpfs: as the node.
		add(ns, keyUsageOff, run([]time.Duration{95 * µs, 130 * µs}[round], 3*ms, 0, 0, 0.3))
		add(ns, keyTmpfs, run([]time.Duration{110 * µs, 150 * µs}[round], 3*ms, 0, 0, 0.3))
		// The twin: 100, 150 µs (node ÷ twin 1.10, 1.00; pooled 130 ÷ 125).
		add(ns, keyTwin, run([]time.Duration{100 * µs, 150 * µs}[round], 3*ms, 0, 0, 0.3))
		// Streams: TTFB over the 1 ms delay 2 ms vs 2.5 ms (1.25×); gaps
		// over the 5 ms gap 1 ms vs 1.1 ms; CPU 1000 vs 1100 µs; the node's
		// runs saturate the load side.
		add(st, keyBaseline, run(1000*µs, 20*ms, 3*ms, 6*ms, 0.5))
		add(st, keyNode, run(1100*µs, 20*ms, 3500*µs, 6100*µs, 0.95))
	}
	r.MaxRate[keyBaseline] = maxRate{Rate: 10000}
	r.MaxRate[keyNode] = maxRate{Rate: 6000, SideBound: true}
	r.Idle = []idleResult{
		{Target: keyBaseline, Requested: 10, Streams: 10, Opened: 10, RSSBefore: 0, RSSPeak: 10 * 40 << 10},
		{Target: keyNode, Requested: 10, Streams: 10, Opened: 10, RSSBefore: 0, RSSPeak: 10 * 50 << 10},
	}
	r.finish()

	type verdict struct {
		Name   string
		Ratio  float64
		Spread string
		Pass   bool
		Target bool
		Note   bool
	}
	var got []verdict
	for _, c := range r.Checks {
		v := verdict{Name: c.Name, Spread: c.Spread, Pass: c.Pass, Target: c.Target, Note: c.Note != ""}
		if c.Ratio != nil {
			v.Ratio = math.Round(*c.Ratio*1000) / 1000
		}
		got = append(got, v)
	}
	want := []verdict{
		{"CPU per request, " + ns, 1.182, "1.10…1.25×", true, true, false},
		{"CPU per stream, " + st, 1.1, "1.10…1.10×", true, true, true},
		{"stream TTFB p99 (over provider delay), " + st, 1.25, "1.25…1.25×", false, true, true},
		{"event gap p99 over the provider's gap, " + st, 1.1, "1.10…1.10×", true, true, true},
		{"broker attached: CPU per request, node − node with broker down, " + ns, 0, "+2.0…+4.0 µs", true, true, false},
		{"usage events: CPU per request, node − node with usage events off, " + ns, 0, "+15.0…+20.0 µs", false, true, false},
		{"added latency p50, " + ns, 2, "2.00…2.00×", false, false, false},
		{"added latency p99, " + ns, 2, "2.00…2.00×", true, false, false},
		{"maximum sustainable non-stream rate", 0.6, "", false, false, true},
		{"broker down ÷ broker up, latency p50, " + ns, 1, "1.00…1.00×", true, false, false},
		{"broker down ÷ broker up, latency p99, " + ns, 1, "1.00…1.00×", true, false, false},
		{"tracing on ÷ node, CPU per request, " + ns, 1.5, "1.50…1.50×", true, false, false},
		{"usage events on ÷ off, CPU per request, " + ns, 1.156, "1.15…1.16×", false, false, false},
		{"outbox on tmpfs ÷ node, CPU per request, " + ns, 1, "1.00…1.00×", true, false, false},
		{"noise floor: node ÷ its twin, CPU per request, " + ns, 1.04, "1.00…1.10×", true, false, false},
		{"resident memory per idle stream (10 streams)", 1.25, "", false, true, false},
		{"resident memory with 10000 idle streams (extrapolated from 10)", 0, "", true, false, false},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("checks (-got +want):\n%s", diff)
	}
	md := r.markdown()
	for _, row := range []string{
		"| added latency p50, " + ns + " | 2.000 ms | 1.000 ms | 2.00× | 2.00…2.00× | ≤ 1.5× | **FAIL** |  |",
		"| broker attached: CPU per request, node − node with broker down, " + ns + " | 130.0 µs (+3.0 µs) | 127.0 µs | – | +2.0…+4.0 µs | ≤ 5.0 µs more | pass |  |",
		"| usage events: CPU per request, node − node with usage events off, " + ns + " | 130.0 µs (+17.5 µs) | 112.5 µs | – | +15.0…+20.0 µs | ≤ 10.0 µs more | **FAIL** |  |",
		"| CPU per stream, " + st + " | 1100.0 µs | 1000.0 µs | 1.10× | 1.10…1.10× | ≤ 1.2× | pass | load side CPU 95% with node: saturated, the rate was not reached |",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("markdown lacks the row\n%s\nin\n%s", row, md)
		}
	}
}

// TestSearchStepTunnels: a search step says how many egress tunnels it
// opened, when it opened any.
func TestSearchStepTunnels(t *testing.T) {
	r := newReport(options{rounds: 1, paths: []string{pathOpenAI}}, pinning{}, sutRuntime{})
	r.MaxRate[keyNode] = maxRate{Rate: 1000, FirstFail: 1400}
	r.Steps = []searchStep{
		{Target: keyNode, Rate: 1000, P99: 5 * time.Millisecond, Pass: true, SUTBusy: 0.3, SideBusy: 0.5},
		{Target: keyNode, Rate: 1400, P99: time.Second, SUTBusy: 0.6, SideBusy: 0.99, Tunnels: 12},
	}
	md := r.markdown()
	for _, want := range []string{"1000 ✓ 5.000 ms 30%/50%; 1400 ✗ 1000.000 ms 60%/99% +12 tunnels |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q in\n%s", want, md)
		}
	}
}

// TestTwinCheck: the noise floor fails when the twins differ by more
// than the margin either way, so a cheaper node is as suspect as a
// dearer one.
func TestTwinCheck(t *testing.T) {
	twin := &cell{CPUPerReq: 100}
	for _, tc := range []struct {
		node time.Duration
		pass bool
	}{{100, true}, {110, true}, {111, false}, {91, true}, {90, false}} {
		c := twinCheck("s", &cell{CPUPerReq: tc.node}, twin)
		if c.Pass != tc.pass || c.Limit != "0.91–1.10×" {
			t.Errorf("node %d ÷ twin 100: pass %t, limit %q; want %t, 0.91–1.10×", tc.node, c.Pass, c.Limit, tc.pass)
		}
	}
}

// TestSpread: min…max, with the median from three rounds on.
func TestSpread(t *testing.T) {
	show := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, tc := range []struct {
		per  []float64
		want string
	}{
		{nil, ""},
		{[]float64{1}, "1.00×"},
		{[]float64{1.2, 1}, "1.00…1.20×"},
		{[]float64{1.3, 0.9, 1.0}, "0.90…1.30×, median 1.00×"},
		{[]float64{1.3, 0.9, 1.0, 1.2}, "0.90…1.30×, median 1.10×"},
	} {
		if got := spread(tc.per, show, "×"); got != tc.want {
			t.Errorf("spread(%v) = %q, want %q", tc.per, got, tc.want)
		}
	}
}

// TestTailChecksOutsideStalls: the TTFB and gap targets leave out what
// host stalls overlapped, and say what the ratio was with it.
func TestTailChecksOutsideStalls(t *testing.T) {
	o := options{eventGap: 5 * time.Millisecond, rounds: 1, paths: []string{pathOpenAI}, streamRates: []float64{200}}
	r := newReport(o, pinning{}, sutRuntime{})
	st := scenarioName(apiPaths[pathOpenAI], true, 200)
	const ms = time.Millisecond
	run := func(stalled int) sample {
		shots := make([]loadgen.Shot, 100)
		for i := range shots {
			shots[i] = loadgen.Shot{Latency: 20 * ms, TTFB: 2 * ms, Gaps: []time.Duration{6 * ms}}
			if i < stalled {
				shots[i] = loadgen.Shot{Latency: 60 * ms, TTFB: 40 * ms, Gaps: []time.Duration{45 * ms}, Stalled: true, StalledGaps: []int{0}}
			}
		}
		return sample{res: loadgen.Result{Shots: shots}, sent: 100, wall: time.Second, stalls: min(stalled, 1)}
	}
	r.add(st, pathOpenAI, 200, true, keyBaseline, run(0), 0)
	r.add(st, pathOpenAI, 200, true, keyNode, run(2), 0)
	r.finish()
	got := map[string]string{}
	for _, c := range r.Checks {
		if c.Ratio != nil && !strings.HasPrefix(c.Name, "CPU") {
			got[c.Name] = fmt.Sprintf("%.2f %v %s", *c.Ratio, c.Pass, c.Note)
		}
	}
	want := map[string]string{
		"stream TTFB p99 (over provider delay), " + st: "1.00 true host stalls: node 1, baseline 0; with the samples they overlapped 20.00× (40.000 ms ÷ 2.000 ms)",
		"event gap p99 over the provider's gap, " + st: "1.00 true host stalls: node 1, baseline 0; with the samples they overlapped 40.00× (40000.0 µs ÷ 1000.0 µs)",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tail checks (-want +got):\n%s", d)
	}
	if n := r.cell(st, keyNode); n.StallTTFBs != 2 || n.StallGaps != 2 || n.ClearTTFB.Count != 98 {
		t.Errorf("node cell: %d stalled TTFBs, %d stalled gaps, %d clear TTFBs; want 2, 2, 98", n.StallTTFBs, n.StallGaps, n.ClearTTFB.Count)
	}
}

func TestNote(t *testing.T) {
	quiet := &cell{Target: keyBaseline, SideBusy: 0.5, SUTBusy: 0.3}
	busy := &cell{Target: keyNode, SideBusy: 0.95, SUTBusy: 0.92, Disturbed: 1, OK: 97, Errors: map[string]int{"timeout": 2, "status 502": 1}}
	if got := note(quiet, quiet); got != "" {
		t.Errorf("note of quiet runs = %q, want none", got)
	}
	want := "load side CPU 95% with node: saturated, the rate was not reached; node CPU 92%: saturated; " +
		"node: 1 disturbed run(s) kept; node: 3 of 100 requests failed (not in the figures)"
	if got := note(quiet, busy); got != want {
		t.Errorf("note = %q\nwant   %q", got, want)
	}
}

// TestScenarios checks what a round runs: every path at every rate
// against the baseline and the node, the variants on the first path only.
func TestScenarios(t *testing.T) {
	all := map[string]*target{}
	for key := range targetNames {
		all[key] = &target{key: key}
	}
	list := func(args ...string) []string {
		t.Helper()
		o, err := parseFlags(args)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sc := range scenarios(o, all) {
			var keys []string
			for _, t := range sc.targets {
				keys = append(keys, t.key)
			}
			out = append(out, fmt.Sprintf("%s (%s %t %g): %s", sc.name, sc.path.url, sc.stream, sc.rate, strings.Join(keys, " ")))
		}
		return out
	}
	const (
		pair     = "baseline node"
		variants = "baseline node node-broker-down node-usage-off node-outbox-tmpfs node-tracing node-batched node-twin"
	)
	want := []string{
		"chat completions, non-stream @ 500/s (/v1/chat/completions false 500): " + variants,
		"chat completions, non-stream @ 2000/s (/v1/chat/completions false 2000): " + pair,
		"chat completions, stream @ 200/s (/v1/chat/completions true 200): " + variants,
		"chat completions, stream @ 1000/s (/v1/chat/completions true 1000): " + pair,
		"messages, non-stream @ 500/s (/v1/messages false 500): " + pair,
		"messages, non-stream @ 2000/s (/v1/messages false 2000): " + pair,
		"messages, stream @ 200/s (/v1/messages true 200): " + pair,
		"messages, stream @ 1000/s (/v1/messages true 1000): " + pair,
		"responses, non-stream @ 500/s (/v1/responses false 500): " + pair,
		"responses, non-stream @ 2000/s (/v1/responses false 2000): " + pair,
		"responses, stream @ 200/s (/v1/responses true 200): " + pair,
		"responses, stream @ 1000/s (/v1/responses true 1000): " + pair,
	}
	if diff := cmp.Diff(list(), want); diff != "" {
		t.Errorf("default scenarios (-got +want):\n%s", diff)
	}
	want = []string{
		"responses, stream @ 50/s (/v1/responses true 50): " + variants,
		"messages, stream @ 50/s (/v1/messages true 50): " + pair,
	}
	if diff := cmp.Diff(list("-paths", "responses,anthropic", "-rates", "", "-stream-rates", "50"), want); diff != "" {
		t.Errorf("streams only, responses first (-got +want):\n%s", diff)
	}
	want = []string{"chat completions, stream @ 200/s (/v1/chat/completions true 200): baseline node node-broker-down"}
	if diff := cmp.Diff(list("-rates", "", "-stream-rates", "200", "-paths", "openai", "-variants", "node-broker-down"), want); diff != "" {
		t.Errorf("one variant (-got +want):\n%s", diff)
	}
	want = []string{"chat completions, stream @ 200/s (/v1/chat/completions true 200): " + pair}
	if diff := cmp.Diff(list("-rates", "", "-stream-rates", "200", "-paths", "openai", "-variants", ""), want); diff != "" {
		t.Errorf("no variants (-got +want):\n%s", diff)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-paths", "openai,grpc"},
		{"-paths", "openai,openai"},
		{"-paths", ""},
		{"-stream-rates", "200,0"},
		{"-stream-rates", "fast"},
		{"-rates", "500,"},
		{"-rates", "", "-stream-rates", ""},
		{"-variants", "node"},
		{"-variants", "node-usage-off,node-usage-off"},
		{"-variants", "node-usage-off", "-search-targets", "baseline,node-tracing"},
		{"-stalls", "yes"},
		{"-sut-gomemlimit", "-1"},
		{"-sut-gomemlimit", "9223372036854775807"},
		{"-overload", "-search=false"},
		{"-overload", "-overload-rate", "6000"},
		{"-overload", "-overload-rate", "6000", "-recovery-rate", "6000"},
		{"-overload", "-overload-rate", "6000", "-recovery-rate", "1500", "-overload-reps", "0"},
		{"-overload", "-overload-rate", "-1"},
		{"-overload", "-overload-rate", "6000", "-recovery-rate", "1500", "-overload-tries", "0"},
		{"-overload", "-overload-rate", "6000", "-recovery-rate", "1500", "-max-lag", "0s"},
		{"-cpu-quota", "-0.1"},
		{"-cpu-quota", "1.5"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

// TestParseFlagsOverloadAt: an absolute overload schedule needs no
// search; its rates and repetitions reach the options.
func TestParseFlagsOverloadAt(t *testing.T) {
	o, err := parseFlags([]string{"-overload", "-search=false", "-overload-rate", "6000", "-recovery-rate", "1500"})
	if err != nil {
		t.Fatal(err)
	}
	if o.overloadRate != 6000 || o.recoveryRate != 1500 || o.overloadReps != 3 {
		t.Errorf("overload %g/s, then %g/s, %d reps; want 6000, 1500, 3", o.overloadRate, o.recoveryRate, o.overloadReps)
	}
}

// TestPathsEndToEnd sends every path's request and stream through the node
// (app.Run of the generated config, as -role=node runs it) and through the
// baseline's proxy, both over a SOCKS5 egress to the fake provider with
// the harness's script, and checks what the provider received: each path
// on its own endpoint, with the provider key in that protocol's header.
func TestPathsEndToEnd(t *testing.T) {
	const key, events = "k-provider", 5
	t.Setenv(providerKeyEnv, key)
	var count atomic.Int64
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: key, AnthropicKey: key, Script: providerScript(0, events, 0, &count)})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	provider := strings.TrimSuffix(base, "/v1")
	socks, socksAddr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer socks.Close()
	egress := "socks5://" + socksAddr

	dir := t.TempDir()
	cfgPath, err := writeNodeDir(dir, nodeSetup{NodeID: "load-test", Provider: provider, Egress: egress, Usage: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	listening, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- app.Run(ctx, cfg, app.Options{Logger: slog.New(slog.DiscardHandler), BaseDir: dir,
			Listening: func(api, _ net.Addr) { listening <- "http://" + api.String() }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	}()
	var nodeURL string
	select {
	case nodeURL = <-listening:
	case err := <-done:
		t.Fatalf("node did not start: %v", err)
	}
	rp, err := newBaselineProxy(provider, egress, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	hop := httptest.NewServer(rp)
	defer hop.Close()
	client := newClient()
	defer client.CloseIdleConnections()

	// Each API's events around the content: see TestFormats.
	framing := map[string]int{pathOpenAI: 4, pathAnthropic: 6, pathResponses: 8}
	systems := []struct {
		name, base string
		models     map[string]string // the model the provider sees
	}{
		{"node", nodeURL, map[string]string{pathOpenAI: providerModel, pathAnthropic: providerClaude, pathResponses: providerModel}},
		{"baseline", hop.URL, map[string]string{pathOpenAI: benchModel, pathAnthropic: benchClaude, pathResponses: benchModel}},
	}
	for _, sys := range systems {
		for _, pk := range pathOrder {
			p := apiPaths[pk]
			t.Run(sys.name+"/"+pk, func(t *testing.T) {
				prov.Reset()
				for _, fire := range []struct {
					stream bool
					fire   loadgen.Fire
				}{
					{false, loadgen.NonStream(client, p.wholeRequest(sys.base))},
					{true, loadgen.Stream(client, p.streamRequest(sys.base, events), p.format)},
				} {
					s := loadgen.Shot{Intended: time.Now()}
					sctx, stop := context.WithTimeout(ctx, 10*time.Second)
					fire.fire(sctx, &s)
					stop()
					if s.Err != nil {
						t.Fatalf("stream %t: %v", fire.stream, s.Err)
					}
					if fire.stream && (s.Events != events+framing[pk] || len(s.Gaps) != s.Events-1) {
						t.Errorf("stream: %d events, %d gaps; want %d events", s.Events, len(s.Gaps), events+framing[pk])
					}
				}
				var got []string
				for _, r := range prov.Requests() {
					cred := r.Header.Get("Authorization")
					if pk == pathAnthropic {
						cred = r.Header.Get("X-Api-Key")
					}
					got = append(got, fmt.Sprintf("%s %s %s stream=%t", r.Path, r.Model, cred, r.Stream))
				}
				cred := "Bearer " + key
				if pk == pathAnthropic {
					cred = key
				}
				want := []string{
					fmt.Sprintf("%s %s %s stream=false", p.url, sys.models[pk], cred),
					fmt.Sprintf("%s %s %s stream=true", p.url, sys.models[pk], cred),
				}
				if diff := cmp.Diff(got, want); diff != "" {
					t.Errorf("provider received (-got +want):\n%s", diff)
				}
			})
		}
	}
}

// TestOTLPSink checks the trace sink counts OTLP/HTTP exports and refuses
// anything else, so a misdirected exporter shows in the report.
func TestOTLPSink(t *testing.T) {
	s, err := startOTLPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	post := func(url, body string) int {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(s.url(), `{"resourceSpans":[]}`); code != http.StatusOK {
		t.Errorf("POST /v1/traces: %d, want 200", code)
	}
	if code := post(strings.TrimSuffix(s.url(), "/v1/traces")+"/v1/metrics", "{}"); code != http.StatusNotFound {
		t.Errorf("POST /v1/metrics: %d, want 404", code)
	}
	if diff := cmp.Diff(s.counts(), traceFinding{Exports: 1, Bytes: 20, Refused: 1}); diff != "" {
		t.Errorf("counts (-got +want):\n%s", diff)
	}
}

// TestSUTStatsCPU checks the CPU time a system under test reports for
// itself (getrusage, what CPU per request is charged from) moves with work
// done, to finer than /proc's 10 ms ticks.
func TestSUTStatsCPU(t *testing.T) {
	before := readSUTStats().CPU
	if before <= 0 {
		t.Fatalf("CPU = %v, want the process's CPU time so far", before)
	}
	var after time.Duration
	for after <= before { // each read itself uses CPU
		after = readSUTStats().CPU
	}
	// One readSUTStats costs microseconds of CPU; a counter in ticks
	// would first move by a whole 10 ms.
	if d := after - before; d >= 10*time.Millisecond {
		t.Errorf("CPU moved by %v at its first move: not to the microsecond", d)
	}
}
