package app

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
// test:
//
//	SCOOTGATE_MEASURE_FLOOD=1 go test -count=1 -run 'TestMeasureResetFlood$' -v -timeout 30m ./internal/app/
//
// It runs three processes of this test binary: the node (with its fake
// provider and egress proxy), client B and the flooder. Client B (from
// 127.0.0.1, its own key) sends one request every 5 ms, open loop, first
// alone, then while the flooder, from 127.0.0.2 with another key, floods
// the node; it logs B's latencies in both phases and what the flood got,
// for each kind of flood and each variant of the node's limits:
//
//   - h1: HTTP/1.1 connections, 8 at a time, each sending one request
//     and closing at once with a reset (SO_LINGER 0), as fast as they go;
//     B on HTTP/1.1 keep-alive connections.
//   - h2: the HTTP/2 rapid reset, over TLS: 2 connections at a time,
//     each opening streams and resetting each (RST_STREAM CANCEL) right
//     behind its request, as fast as the node takes them in, connecting
//     again whenever the node closes the connection (GOAWAY or not); B
//     on one HTTP/2 connection.
//
// So that the machine's own cost of running the flooder does not read
// as the node's, the processes are pinned: the node to one CPU, B and
// the flooder to another, the flooder at nice 19, the node and B at
// nice -10 (as root: above whatever else the machine runs); and the variant "null" aims the flood at a listener of the
// node's process that closes every connection it accepts (a perfect
// bound: the floor).
//
// Environment:
//
//   - SCOOTGATE_MEASURE_FLOOD_KINDS: "h1,h2" (the default), or one.
//   - SCOOTGATE_MEASURE_FLOOD_LIMITS: the variants, ";" between them,
//     each [limits] keys with "," between them; "null" is the floor,
//     "none" the defaults. Default: null;none.
//   - SCOOTGATE_MEASURE_FLOOD_CPUS: "node/clients" CPU lists for
//     taskset (default "0/1"); "off" runs nothing pinned or reniced.
//   - SCOOTGATE_MEASURE_FLOOD_PRIORITY: "rt" runs the node and B at
//     real-time priority (chrt -r 10) instead of nice -10: on a machine
//     busy with other jobs, their load then reaches neither.
//   - SCOOTGATE_MEASURE_FLOOD_ROUNDS: how many times the whole list of
//     variants runs, interleaved (default 1).
//   - SCOOTGATE_MEASURE_FLOOD_PHASE: a phase's length (default 4s).
//   - SCOOTGATE_MEASURE_FLOOD_PROFILE=dir: the node's CPU profile during
//     each flood phase, and its log (and HAProxy's), go there.
//   - SCOOTGATE_MEASURE_FLOOD_LB: puts HAProxy (deploy/lb/haproxy.cfg,
//     rewritten as TestHAProxyDrain does, both its servers this node)
//     between B and the flooder and the node: "shipped" runs the file as
//     it is, "open" without its per-source limits (the stick table and
//     every tcp-request and http-request rule), ";" between them; "1"
//     is "shipped;open". Each runs with each variant of the node's
//     limits; the floor ("null") runs once, B through HAProxy with the
//     shipped file and the flood at the null listener. The node's
//     process starts HAProxy, so HAProxy runs on the node's CPUs at the
//     node's priority: its cost is counted on the node's side. HAProxy
//     serves TLS (h2 and http/1.1) for the h2 flood and B, as the
//     file's frontend does, and plain HTTP/1.1 for the h1 flood, and
//     speaks plain HTTP/1.1 to the node. The node reports what HAProxy
//     refused from its runtime API.
func TestMeasureResetFlood(t *testing.T) {
	if os.Getenv("SCOOTGATE_MEASURE_FLOOD") == "" {
		t.Skip("a measurement: set SCOOTGATE_MEASURE_FLOOD=1 to run it")
	}
	kinds := strings.Split(envOr("SCOOTGATE_MEASURE_FLOOD_KINDS", "h1,h2"), ",")
	variants := strings.Split(envOr("SCOOTGATE_MEASURE_FLOOD_LIMITS", "null;none"), ";")
	rounds, err := strconv.Atoi(envOr("SCOOTGATE_MEASURE_FLOOD_ROUNDS", "1"))
	if err != nil {
		t.Fatal(err)
	}
	phase := envOr("SCOOTGATE_MEASURE_FLOOD_PHASE", "4s")
	var nodeCPUs, clientCPUs string
	if c := envOr("SCOOTGATE_MEASURE_FLOOD_CPUS", "0/1"); c != "off" {
		var ok bool
		if nodeCPUs, clientCPUs, ok = strings.Cut(c, "/"); !ok {
			t.Fatalf("SCOOTGATE_MEASURE_FLOOD_CPUS = %q, want node/clients CPU lists", c)
		}
	}
	realtime := os.Getenv("SCOOTGATE_MEASURE_FLOOD_PRIORITY") == "rt"
	lbs := []string{""}
	switch lb := os.Getenv("SCOOTGATE_MEASURE_FLOOD_LB"); lb {
	case "":
	case "1":
		lbs = []string{"shipped", "open"}
	default:
		lbs = strings.Split(lb, ";")
		for _, l := range lbs {
			if l != "shipped" && l != "open" {
				t.Fatalf("SCOOTGATE_MEASURE_FLOOD_LB: %q, want shipped or open", l)
			}
		}
	}
	profile := os.Getenv("SCOOTGATE_MEASURE_FLOOD_PROFILE")
	if profile != "" {
		if err := os.MkdirAll(profile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for round := range rounds {
		for _, kind := range kinds {
			for _, v := range variants {
				for i, lb := range lbs {
					if v == "null" && i > 0 {
						continue // one floor
					}
					if v == "null" && lb != "" {
						lb = "shipped"
					}
					n++
					name := fmt.Sprintf("%d:%s:%s", round, kind, v)
					if lb != "" {
						name += ":lb-" + lb
					}
					t.Run(name, func(t *testing.T) {
						limits := strings.ReplaceAll(v, ",", "\n")
						if v == "null" || v == "none" {
							limits = ""
						}
						m := &floodRun{t: t, kind: kind, phase: phase, nodeCPUs: nodeCPUs, clientCPUs: clientCPUs, realtime: realtime, lb: lb}
						if profile != "" {
							m.profile = fmt.Sprintf("%s/flood%d-%s", profile, n, kind)
						}
						m.run(limits, v == "null")
					})
				}
			}
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// floodRun is one variant of TestMeasureResetFlood: its three processes.
type floodRun struct {
	t                    *testing.T
	kind, phase          string
	nodeCPUs, clientCPUs string
	profile              string // file name prefix, or ""
	realtime             bool   // the node and B at real-time priority, not nice -10
	lb                   string // "shipped" or "open": HAProxy in front of the node; "": none
}

// child starts this test binary as TestFloodChild in role, pinned to
// cpus at niceness nice (when cpus is set).
func (m *floodRun) child(role, cpus string, nice int, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	m.t.Helper()
	args := []string{os.Args[0], "-test.run=^TestFloodChild$", "-test.count=1"}
	if cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
		if nice < 0 && m.realtime {
			// Round-robin real-time: above every ordinary process, so
			// that other jobs on the machine do not delay the node or B
			// (the kernel keeps 5 % of each second for the others).
			args = append([]string{"chrt", "-r", "10"}, args...)
		} else {
			args = append([]string{"nice", "-n", strconv.Itoa(nice)}, args...)
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	// The children are killed, so their own t.TempDir is never removed:
	// under this test's, it is.
	cmd.Env = append(os.Environ(), append(env, "TMPDIR="+m.t.TempDir(), "SCOOTGATE_FLOOD_ROLE="+role, "SCOOTGATE_FLOOD_KIND="+m.kind, "SCOOTGATE_MEASURE_FLOOD_PHASE="+m.phase)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	return cmd, in, sc
}

// line returns the child's next line that starts with prefix (the
// others are go test's own output), without the prefix.
func (m *floodRun) line(sc *bufio.Scanner, prefix string) string {
	m.t.Helper()
	var other strings.Builder
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return rest
		}
		other.WriteString(sc.Text() + "\n")
	}
	m.t.Fatalf("child ended before a %q line (%v):\n%s", prefix, sc.Err(), other.String())
	return ""
}

func (m *floodRun) run(limits string, null bool) {
	t := m.t
	lbLog := ""
	if m.profile != "" && m.lb != "" {
		lbLog = m.profile + "-haproxy.log"
	}
	_, nodeIn, nodeOut := m.child("node", m.nodeCPUs, -10, "SCOOTGATE_FLOOD_NODE_LIMITS="+limits, "SCOOTGATE_FLOOD_LB="+m.lb, "SCOOTGATE_FLOOD_LB_LOG="+lbLog)
	var ready struct{ API, Null, CA string }
	if err := json.Unmarshal([]byte(m.line(nodeOut, "ready ")), &ready); err != nil {
		t.Fatal(err)
	}
	_, bIn, bOut := m.child("b", m.clientCPUs, -10, "SCOOTGATE_FLOOD_TARGET="+ready.API, "SCOOTGATE_FLOOD_CA="+ready.CA)
	measure := func() floodLatencies {
		t.Helper()
		if _, err := io.WriteString(bIn, "measure\n"); err != nil {
			t.Fatal(err)
		}
		var l floodLatencies
		if err := json.Unmarshal([]byte(m.line(bOut, "latencies ")), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	measure() // warm B's connections and the node
	load0 := loadAverage()
	base := measure()

	target := ready.API
	if null {
		target = ready.Null
	}
	if m.profile != "" {
		if _, err := fmt.Fprintf(nodeIn, "profile %s.pprof\n", m.profile); err != nil {
			t.Fatal(err)
		}
		m.line(nodeOut, "profiling")
	}
	drops0 := listenDrops()
	flood, _, floodOut := m.child("flood", m.clientCPUs, 19, "SCOOTGATE_FLOOD_TARGET="+target, "SCOOTGATE_FLOOD_CA="+ready.CA)
	m.line(floodOut, "flooding")
	under := measure()
	load1 := loadAverage()
	drops := listenDrops() - drops0
	_ = flood.Process.Signal(os.Interrupt)
	res := m.line(floodOut, "flood ")
	if _, err := io.WriteString(nodeIn, "stop\n"); err != nil {
		t.Fatal(err)
	}
	stats := m.line(nodeOut, "stopped ")
	if m.profile != "" {
		if _, err := fmt.Fprintf(nodeIn, "log %s.log\n", m.profile); err != nil {
			t.Fatal(err)
		}
		m.line(nodeOut, "logged")
	}
	t.Logf("load average %s → %s\nB alone:         %s\nB under the flood: %s\nflood: %s\nnode: %s\nlisten queue overflows and drops during the flood (the machine's): %d",
		load0, load1, base, under, res, stats, drops)
}

// loadAverage is the 1-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// listenDrops is the machine's TcpExt ListenOverflows + ListenDrops
// (/proc/net/netstat): connections a full listen queue dropped.
func listenDrops() int64 {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0
	}
	lines := strings.Split(string(b), "\n")
	var n int64
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j := range min(len(names), len(values)) {
			if names[0] == "TcpExt:" && (names[j] == "ListenOverflows" || names[j] == "ListenDrops") {
				v, _ := strconv.ParseInt(values[j], 10, 64)
				n += v
			}
		}
	}
	return n
}

// floodLatencies is what client B reports of a phase.
type floodLatencies struct {
	N, Fresh, Errors int // requests answered 200, connections opened, failures
	P50, P90, P99    time.Duration
	Max              time.Duration
	Status           map[int]int `json:",omitempty"` // answers other than 200
	// Worst are the slowest requests' latencies, each at its send time
	// from the phase's start: a transient and a steady cost look apart.
	Worst []floodSample `json:",omitempty"`
}

// floodSample is one of B's requests: when it was sent (from the
// phase's start) and how long its answer took.
type floodSample struct{ At, Latency time.Duration }

func (l floodLatencies) String() string {
	s := fmt.Sprintf("%d requests, p50 %v, p90 %v, p99 %v, max %v; %d new connections, %d errors",
		l.N, l.P50.Round(10*time.Microsecond), l.P90.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond), l.Max.Round(time.Millisecond), l.Fresh, l.Errors)
	if len(l.Status) > 0 {
		s += fmt.Sprintf(", other statuses %v", l.Status)
	}
	if len(l.Worst) > 0 {
		s += "; slowest (latency@sent)"
		for _, w := range l.Worst {
			s += fmt.Sprintf(" %v@%v", w.Latency.Round(time.Millisecond), w.At.Round(10*time.Millisecond))
		}
	}
	return s
}

// TestFloodChild is TestMeasureResetFlood's node, client B and flooder,
// by SCOOTGATE_FLOOD_ROLE.
func TestFloodChild(t *testing.T) {
	switch os.Getenv("SCOOTGATE_FLOOD_ROLE") {
	case "node":
		floodNode(t)
	case "b":
		floodClientB(t)
	case "flood":
		switch os.Getenv("SCOOTGATE_FLOOD_KIND") {
		case "h1":
			floodH1(t)
		case "h2":
			floodH2(t)
		default:
			t.Fatalf("SCOOTGATE_FLOOD_KIND = %q", os.Getenv("SCOOTGATE_FLOOD_KIND"))
		}
	default:
		t.Skip("TestMeasureResetFlood's child")
	}
}

// floodNode runs the node (over TLS for the h2 flood) and a null
// listener, or with SCOOTGATE_FLOOD_LB HAProxy in front of the node (it
// then serves the TLS), says where they are, and then follows its
// commands on stdin: "profile file" starts a CPU profile, "stop" stops
// it and prints the node's connection counts (and HAProxy's), "log
// file" writes the node's log; at the end of stdin it stops.
func floodNode(t *testing.T) {
	o := stackOptions{cap: 1000, limits: os.Getenv("SCOOTGATE_FLOOD_NODE_LIMITS")}
	lb := os.Getenv("SCOOTGATE_FLOOD_LB")
	ca, key := "", ""
	if os.Getenv("SCOOTGATE_FLOOD_KIND") == "h2" {
		ca, key, _ = selfSigned(t)
		if lb == "" {
			o.tlsCert, o.tlsKey = ca, key
		}
	}
	s := startStack(t, o)
	api, stats := s.api, func() string { return "" }
	if lb != "" {
		api, stats = floodHAProxy(t, s, lb, ca, key)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var nullAccepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			nullAccepted.Add(1)
			_ = c.Close()
		}
	}()
	ready, _ := json.Marshal(map[string]string{"API": api, "Null": ln.Addr().String(), "CA": ca})
	fmt.Printf("ready %s\n", ready)
	sc := bufio.NewScanner(os.Stdin)
	var profile *os.File
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "profile":
			if profile, err = os.Create(arg); err != nil {
				t.Fatal(err)
			}
			if err := pprof.StartCPUProfile(profile); err != nil {
				t.Fatal(err)
			}
			fmt.Println("profiling")
		case "stop":
			if profile != nil {
				pprof.StopCPUProfile()
				_ = profile.Close()
			}
			fmt.Printf("stopped null listener accepted %d; %s%s\n", nullAccepted.Load(), s.floodStats(), stats())
		case "log":
			if err := os.WriteFile(arg, []byte(s.logs.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Println("logged")
		}
	}
}

// floodHAProxy starts HAProxy with deploy/lb/haproxy.cfg ("shipped", or
// "open": without its per-source limits) in front of s, both its
// servers s, serving TLS with cert and key when cert is set, and
// returns its URL and a func that says what it refused and forwarded.
func floodHAProxy(t *testing.T, s *stack, lb, cert, key string) (string, func() string) {
	t.Helper()
	haproxy := requireTool(t, "haproxy", "haproxy")
	dir := t.TempDir()
	rw := haproxyRewrite{statsSocket: dir + "/stats.sock", open: lb == "open"}
	scheme := "http://"
	if cert != "" {
		var pem []byte
		for _, f := range []string{cert, key} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pem = append(pem, b...)
		}
		rw.tlsCert = dir + "/frontend.pem"
		if err := os.WriteFile(rw.tlsCert, pem, 0o600); err != nil {
			t.Fatal(err)
		}
		scheme = "https://"
	}
	logFile := envOr("SCOOTGATE_FLOOD_LB_LOG", dir+"/haproxy.log")
	logs, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	addr := startHAProxy(t, haproxy, haproxyConfigWith(t, rw, s, s), logs)
	return scheme + addr, func() string { return haproxyStats(rw.statsSocket) }
}

// haproxyStats says, from HAProxy's runtime API, what its frontend
// took in and refused and how many sessions its backend opened.
func haproxyStats(socket string) string {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return "haproxy: " + err.Error()
	}
	defer c.Close()
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return "haproxy: " + err.Error()
	}
	text, _ := io.ReadAll(c)
	lines := strings.Split(strings.TrimPrefix(string(text), "# "), "\n")
	cols := map[string]int{}
	for i, name := range strings.Split(lines[0], ",") {
		cols[name] = i
	}
	var b strings.Builder
	b.WriteString("haproxy:")
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) < len(cols) {
			continue
		}
		get := func(name string) string { return f[cols[name]] }
		switch get("svname") {
		case "FRONTEND":
			fmt.Fprintf(&b, " frontend %s: %s connections refused at accept, %s sessions, %s requests (%s denied, %s errors);",
				get("pxname"), get("dcon"), get("stot"), get("req_tot"), get("dreq"), get("ereq"))
		case "BACKEND":
			fmt.Fprintf(&b, " backend %s: %s sessions, %s client aborts, %s connection errors;",
				get("pxname"), get("stot"), get("cli_abrt"), get("econ"))
		}
	}
	return b.String()
}

// floodStats says what the node's connection bounds refused.
func (s *stack) floodStats() string {
	resp, err := http.Get(s.health + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	var b strings.Builder
	for l := range strings.Lines(string(text)) {
		if strings.HasPrefix(l, "scootgate_client_conns") || strings.HasPrefix(l, "scootgate_client_penalties") || strings.HasPrefix(l, "scootgate_client_refused") {
			b.WriteString(strings.TrimSpace(l) + "; ")
		}
	}
	return b.String()
}

// floodClientB sends, for each "measure" line on stdin, one request
// every 5 ms for a phase, open loop (a stall delays every request behind
// it, as it would a real client's), and prints its latencies.
func floodClientB(t *testing.T) {
	phase, err := time.ParseDuration(os.Getenv("SCOOTGATE_MEASURE_FLOOD_PHASE"))
	if err != nil {
		t.Fatal(err)
	}
	api := os.Getenv("SCOOTGATE_FLOOD_TARGET")
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	if ca := os.Getenv("SCOOTGATE_FLOOD_CA"); ca != "" {
		tr.TLSClientConfig = &tls.Config{RootCAs: floodPool(t, ca)}
		tr.ForceAttemptHTTP2 = true
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	var fresh atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			fresh.Add(1)
		}
	}}
	body := `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var (
			mu      sync.Mutex
			lat     []time.Duration
			samples []floodSample
			wg      sync.WaitGroup
			res     = floodLatencies{Status: map[int]int{}}
		)
		fresh.Store(0)
		tick := time.NewTicker(5 * time.Millisecond)
		begin := time.Now()
		for end := begin.Add(phase); time.Now().Before(end); {
			start := <-tick.C
			wg.Go(func() {
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, api+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Authorization", "Bearer "+clientKey)
				resp, err := client.Do(req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					res.Errors++
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					res.Status[resp.StatusCode]++
					return
				}
				lat = append(lat, time.Since(start))
				samples = append(samples, floodSample{At: start.Sub(begin), Latency: lat[len(lat)-1]})
			})
		}
		tick.Stop()
		wg.Wait()
		slices.Sort(lat)
		if len(lat) == 0 {
			lat = []time.Duration{0}
		}
		q := func(p float64) time.Duration { return lat[int(float64(len(lat)-1)*p)] }
		res.N, res.Fresh = len(lat), int(fresh.Load())
		res.P50, res.P90, res.P99, res.Max = q(0.5), q(0.9), q(0.99), lat[len(lat)-1]
		slices.SortFunc(samples, func(a, b floodSample) int { return int(b.Latency - a.Latency) })
		res.Worst = samples[:min(len(samples), 8)]
		out, _ := json.Marshal(res)
		fmt.Printf("latencies %s\n", out)
	}
}

func floodPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", file)
	}
	return pool
}

// floodUntilInterrupt runs flood on 'workers' goroutines until the
// process is interrupted, and then prints what they did.
func floodUntilInterrupt(workers int, flood func(stop *atomic.Bool)) time.Duration {
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	start := time.Now()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	for range workers {
		wg.Go(func() { flood(&stop) })
	}
	fmt.Println("flooding")
	<-sig
	stop.Store(true)
	wg.Wait()
	return time.Since(start)
}

var floodSource = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// floodH1 opens HTTP/1.1 connections from 127.0.0.2 to
// SCOOTGATE_FLOOD_TARGET, 8 at a time, each sending one request of the
// limited key and closing with a reset.
func floodH1(t *testing.T) {
	target := strings.TrimPrefix(os.Getenv("SCOOTGATE_FLOOD_TARGET"), "http://")
	body := `{"model":"demo-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	req := fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: n\r\nx-api-key: %s\r\nanthropic-version: 2023-06-01\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", limitedKey, len(body), body)
	var opened, failed atomic.Int64
	el := floodUntilInterrupt(8, func(stop *atomic.Bool) {
		d := net.Dialer{LocalAddr: floodSource}
		for !stop.Load() {
			c, err := d.Dial("tcp", target)
			if err != nil {
				failed.Add(1)
				continue
			}
			opened.Add(1)
			_, _ = c.Write([]byte(req))
			_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
			_ = c.Close()
		}
	})
	fmt.Printf("flood %d connections (%.0f/s), %d dials failed\n", opened.Load(), float64(opened.Load())/el.Seconds(), failed.Load())
}

// floodH2 runs the HTTP/2 rapid reset from 127.0.0.2 against
// SCOOTGATE_FLOOD_TARGET, on 2 connections at a time, connecting again
// whenever the node closes one.
func floodH2(t *testing.T) {
	target := strings.TrimPrefix(os.Getenv("SCOOTGATE_FLOOD_TARGET"), "https://")
	pool := floodPool(t, os.Getenv("SCOOTGATE_FLOOD_CA"))
	body := `{"model":"demo-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	var (
		streams, conns, failed atomic.Int64
		mu                     sync.Mutex
		last                   string
	)
	el := floodUntilInterrupt(2, func(stop *atomic.Bool) {
		d := &net.Dialer{LocalAddr: floodSource}
		for !stop.Load() {
			f, err := tryRapidResetFrom(d, target, pool)
			if err != nil {
				failed.Add(1) // closed at accept or in the handshake: connect again
				continue
			}
			conns.Add(1)
			done := make(chan struct{})
			go func() { // the interrupt ends the flood of the open connection
				for !stop.Load() {
					select {
					case <-done:
						return
					case <-f.stopped:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
				_ = f.conn.Close()
			}()
			streams.Add(int64(f.flood(target, "/v1/messages", limitedKey, body, time.Hour, 1<<30)))
			close(done)
			f.close()
			mu.Lock()
			last = f.summary()
			mu.Unlock()
		}
	})
	fmt.Printf("flood %d streams (%.0f/s) on %d connections, %d connections failed at connect or handshake; the last: %s\n",
		streams.Load(), float64(streams.Load())/el.Seconds(), conns.Load(), failed.Load(), last)
}
