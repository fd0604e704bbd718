package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
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
	}{
		{"broker up", nodeSetup{Broker: "127.0.0.1:1883", Usage: true}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, ""},
		{"usage off", nodeSetup{Usage: false}, false, "", 100 * time.Millisecond, ""},
		{"connect egress", nodeSetup{Egress: "http://127.0.0.1:3128", Usage: true}, true, "", 100 * time.Millisecond, ""},
		{"commit interval", nodeSetup{Usage: true, CommitInterval: 100 * time.Millisecond}, true, "", 100 * time.Millisecond, ""},
		{"tracing on", nodeSetup{Broker: "127.0.0.1:1883", Usage: true, Tracing: "http://127.0.0.1:4318/v1/traces"}, true, "tcp://127.0.0.1:1883", 100 * time.Millisecond, "http://127.0.0.1:4318/v1/traces"},
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
				cfg.Tracing.Endpoint, cfg.Tracing.SampleRatio, cfg.Tracing.Interval}
			want := []any{tt.wantUsage, tt.wantBroker, s.Egress, "file:" + dir + "/authz.json", tt.wantCommit,
				tt.wantTrace, wantRatio, wantInterval}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("usage, broker, egress, authz, commit interval, tracing endpoint, ratio, interval (-got +want):\n%s", diff)
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

// TestChecks feeds the report measured summaries and checks the ratios and
// verdicts it derives.
func TestChecks(t *testing.T) {
	r := newReport(options{delay: time.Millisecond, eventGap: 5 * time.Millisecond, rates: []float64{500}}, pinning{})
	summary := func(p50, p99 time.Duration) loadgen.Summary { return loadgen.Summary{P50: p50, P99: p99} }
	add := func(c *cell) { r.Cells = append(r.Cells, c); r.byKey[c.Scenario+"\x00"+c.Target] = c }
	const ns = "non-stream @ 500/s"
	// Added latency: node 3 ms - 1 ms = 2 ms vs baseline 2 ms - 1 ms = 1 ms → 2×.
	add(&cell{Scenario: ns, Target: keyBaseline, Service: summary(2*time.Millisecond, 3*time.Millisecond), CPUPerReq: 100 * time.Microsecond})
	add(&cell{Scenario: ns, Target: keyNode, Service: summary(3*time.Millisecond, 5*time.Millisecond), CPUPerReq: 140 * time.Microsecond})
	add(&cell{Scenario: ns, Target: keyBrokerDown, Service: summary(3*time.Millisecond, 5*time.Millisecond)})
	add(&cell{Scenario: ns, Target: keyTracing, Service: summary(3*time.Millisecond, 5*time.Millisecond), CPUPerReq: 168 * time.Microsecond})
	r.MaxRate[keyBaseline] = maxRate{Rate: 10000}
	r.MaxRate[keyNode] = maxRate{Rate: 6000}
	r.Idle = []idleResult{{Target: keyNode, Streams: 10, Opened: 10, RSSBefore: 0, RSSPeak: 10 * 50 << 10}}

	type verdict struct {
		Name  string
		Ratio float64
		Pass  bool
	}
	r.Checks = r.checks()
	var got []verdict
	for _, c := range r.Checks {
		v := verdict{Name: c.Name, Pass: c.Pass}
		if c.Ratio != nil {
			v.Ratio = *c.Ratio
		}
		got = append(got, v)
	}
	want := []verdict{
		{"added latency p50, " + ns, 2, false},
		{"added latency p99, " + ns, 2, true},
		{"CPU per request, " + ns, 1.4, true},
		{"maximum sustainable non-stream rate", 0.6, false},
		{"broker down ÷ broker up, latency p50", 1, true},
		{"broker down ÷ broker up, latency p99", 1, true},
		{"tracing on ÷ node, CPU per request, " + ns, 1.2, true},
		{"resident memory per idle stream (10 streams)", 0, true},
		{"resident memory with 10000 idle streams (extrapolated from 10)", 0, true},
	}
	if diff := cmp.Diff(got, want, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("checks (-got +want):\n%s", diff)
	}
	if md := r.markdown(); !strings.Contains(md, "| added latency p50, "+ns+" | 2.000 ms | 1.000 ms | 2.00× | ≤ 1.5× | **FAIL** |") {
		t.Errorf("markdown lacks the failing check row:\n%s", md)
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
