package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// The keys of TestFleetLimitsMeasure, one per kind of limit.
const (
	fleetRPMKey  = "sk-fleet-rpm"
	fleetTPMKey  = "sk-fleet-tpm"
	fleetConcKey = "sk-fleet-conc"
	fleetFreeKey = "sk-fleet-free" // no limits: measures a request's tokens
	// fleetHold is how long the provider takes to answer a request of
	// the max_concurrent key: a slot is held that long.
	fleetHold = 2 * time.Second
)

// TestFleetLimitsMeasure is the fleet measurement of the redis store of
// limits on real node processes (docs/limits.md "Measured"): four nodes
// built from this command, each its own process with its own Redis
// client, share one redis-server on loopback; a client spreads the load
// evenly over them (round robin, as a balancer would) and offers each
// key five times what its limit lets through, one kind of limit at a
// time, for SCOOTGATE_MEASURE_FLEET_LIMITS_DURATION (default 60s) each:
// requests per minute 600, tokens per minute ten requests' worth a
// second, max_concurrent 10 with the provider answering after 2 s. It
// reports what was admitted against what the limit allows, and the
// round trips to Redis per offered request, read from every node's
// scootgate_limits_store_round_trips_total. A measurement, not a timed
// test: it runs only with SCOOTGATE_MEASURE_FLEET_LIMITS=1.
func TestFleetLimitsMeasure(t *testing.T) {
	if os.Getenv("SCOOTGATE_MEASURE_FLEET_LIMITS") != "1" {
		t.Skip("set SCOOTGATE_MEASURE_FLEET_LIMITS=1 to measure the fleet's limits on four node processes")
	}
	duration := time.Minute
	if v := os.Getenv("SCOOTGATE_MEASURE_FLEET_LIMITS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("SCOOTGATE_MEASURE_FLEET_LIMITS_DURATION=%q: want a duration of at least 10s", v)
		}
		duration = d
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed (apt-get install redis-server)")
	}
	exe := buildBinary(t)

	redisAddr := freePort(t)
	_, redisPort, _ := net.SplitHostPort(redisAddr)
	rs := exec.Command(redisBin, "--port", redisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Process.Kill(); _ = rs.Wait() }) // only the server this test started

	// The provider: the max_concurrent key's requests are answered after
	// fleetHold; each request's arrival is recorded, to count the most in
	// progress at once.
	var arrivals arrivalLog
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: crashProviderKey, Script: func(r fakeprovider.Request) *fakeprovider.Behaviour {
		if strings.Contains(r.Prompt, "hold") {
			arrivals.add(time.Now())
			return &fakeprovider.Behaviour{Delay: fleetHold}
		}
		return nil
	}})
	provURL, socksAddr := startProviderAndProxy(t, prov)

	// Calibrate: how many tokens one request uses.
	tokensPer := fleetRequestTokens(t, exe, provURL, "socks5://"+socksAddr)
	tpm := int64(10 * 60 * tokensPer) // ten requests a second
	const rpm, conc = 600, 10

	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k-rpm", TenantID: "t-rpm", Digest: authsnap.Digest(fleetRPMKey), Limits: authsnap.Limits{RequestsPerMinute: rpm}},
		{KeyID: "k-tpm", TenantID: "t-tpm", Digest: authsnap.Digest(fleetTPMKey), Limits: authsnap.Limits{TokensPerMinute: tpm}},
		{KeyID: "k-conc", TenantID: "t-conc", Digest: authsnap.Digest(fleetConcKey), Limits: authsnap.Limits{MaxConcurrent: conc}},
	}}
	var nodes []*crashNode
	var apis []string
	for i := range 4 {
		dir := t.TempDir()
		api, health := freePort(t), freePort(t)
		writeCrashConfig(t, dir, crashConfig{api: api, health: health, provider: provURL, egress: "socks5://" + socksAddr, delay: "0s",
			extra: fmt.Sprintf("[limits]\nstore = \"redis\"\nlocal_share = 0.25\n[limits.redis]\naddress = %q\n", redisAddr)})
		writeAuthz(t, dir, doc)
		n := startCrashNode(t, exe, dir, health, i)
		nodes = append(nodes, n)
		apis = append(apis, "http://"+api)
	}
	for _, n := range nodes {
		n.waitReady(t, 30*time.Second)
		waitStoreUp(t, n)
	}
	roundTrips := func() (sum float64) {
		for _, n := range nodes {
			sum += fleetMetric(t, n.health, "scootgate_limits_store_round_trips_total")
		}
		return sum
	}

	t.Logf("four node processes, one redis-server, %v a kind; a request uses %d tokens", duration, tokensPer)
	for _, sc := range []struct {
		name  string
		key   string
		rate  float64 // offered requests a second
		allow float64 // what the limit lets through in duration, in its unit
		hold  bool
	}{
		{"requests per minute 600", fleetRPMKey, 5 * rpm / 60.0, rpm + rpm*duration.Minutes(), false},
		{fmt.Sprintf("tokens per minute %d", tpm), fleetTPMKey, 5 * float64(tpm) / 60 / float64(tokensPer), float64(tpm) + float64(tpm)*duration.Minutes(), false},
		{"max_concurrent 10", fleetConcKey, 5 * conc / fleetHold.Seconds(), conc, true},
	} {
		arrivals.reset()
		before := roundTrips()
		res := offerFleet(t, apis, sc.key, sc.rate, duration, sc.hold, roundTrips)
		rt := roundTrips() - before
		// The second half: for a per-minute limit, past the bucket's
		// initial fill (spent in 15 s at five times the rate).
		perMin := sc.allow / (1 + duration.Minutes()) // the limit
		steady := fmt.Sprintf("second half: %d of %d offered admitted", res.admitted2, res.offered2)
		if !sc.hold {
			allow2 := perMin * duration.Minutes() / 2
			unit := 1.0
			if sc.key == fleetTPMKey {
				unit = float64(tokensPer)
			}
			steady += fmt.Sprintf(" against the refill's %.0f (%+.1f%%)", allow2/unit, 100*(float64(res.admitted2)*unit/allow2-1))
		}
		steady += fmt.Sprintf(", %.4f round trips per offered request", res.roundTrips2/float64(res.offered2))
		switch {
		case sc.hold:
			most := arrivals.most(fleetHold)
			t.Logf("%s: %d offered (%.1f/s), %d admitted, %d refused, %d other; most in progress %d of %d (%.0f%% of the slot time used); %.4f round trips per offered request (%.0f)",
				sc.name, res.offered, sc.rate, res.admitted, res.refused, res.other, most, conc,
				100*float64(res.admitted)*fleetHold.Seconds()/(float64(conc)*duration.Seconds()), rt/float64(res.offered), rt)
			t.Logf("  %s", steady)
			if most > conc {
				t.Errorf("%s: %d in progress at once, limit %d", sc.name, most, conc)
			}
		case sc.key == fleetTPMKey:
			used := float64(res.admitted * tokensPer)
			t.Logf("%s: %d offered (%.1f/s), %d admitted (%.0f tokens against the bucket's %.0f: %+.1f%%), %d refused, %d other; %.4f round trips per offered request (%.0f)",
				sc.name, res.offered, sc.rate, res.admitted, used, sc.allow, 100*(used/sc.allow-1), res.refused, res.other, rt/float64(res.offered), rt)
			t.Logf("  %s", steady)
		default:
			t.Logf("%s: %d offered (%.1f/s), %d admitted against the bucket's %.0f (%+.1f%%), %d refused, %d other; %.4f round trips per offered request (%.0f)",
				sc.name, res.offered, sc.rate, res.admitted, sc.allow, 100*(float64(res.admitted)/sc.allow-1), res.refused, res.other, rt/float64(res.offered), rt)
			t.Logf("  %s", steady)
		}
		if res.other > 0 {
			t.Errorf("%s: %d answers neither 200 nor 429", sc.name, res.other)
		}
	}
}

// writeAuthz replaces the authorization snapshot writeCrashConfig wrote.
func writeAuthz(t *testing.T, dir string, doc authsnap.Snapshot) {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authz.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitStoreUp polls the node's metrics until its store of limits is up.
func waitStoreUp(t *testing.T, n *crashNode) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for fleetMetric(t, n.health, "scootgate_limits_store_up") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("node %d: limits store not up within 20s:\n%s", n.round, tail(n.output(), 2000))
		}
		time.Sleep(50 * time.Millisecond) // polling an external process
	}
}

// fleetMetric reads one unlabelled metric from the node's /metrics.
func fleetMetric(t *testing.T, health, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + health + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	return 0
}

// fleetRequestTokens runs one node without limits and returns the
// tokens (input + output) one request of offerFleet's uses.
func fleetRequestTokens(t *testing.T, exe, provURL, egress string) int64 {
	t.Helper()
	dir := t.TempDir()
	api, health := freePort(t), freePort(t)
	writeCrashConfig(t, dir, crashConfig{api: api, health: health, provider: provURL, egress: egress, delay: "0s"})
	writeAuthz(t, dir, authsnap.Snapshot{Schema: authsnap.Schema, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k-free", TenantID: "t-free", Digest: authsnap.Digest(fleetFreeKey)},
	}})
	n := startCrashNode(t, exe, dir, health, -1)
	n.waitReady(t, 30*time.Second)
	defer n.term(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+api+"/v1/chat/completions", strings.NewReader(fleetBody(false)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fleetFreeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Usage struct {
			Total int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != http.StatusOK || ans.Usage.Total <= 0 {
		t.Fatalf("calibration request: %d, %v, usage %d", resp.StatusCode, err, ans.Usage.Total)
	}
	return ans.Usage.Total
}

func fleetBody(hold bool) string {
	prompt := "fleet"
	if hold {
		prompt = "fleet hold"
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, crashModel, prompt)
}

// fleetResult counts the answers of one offered load; the second half
// of it (from half the duration on, when a bucket's initial fill is
// spent) on its own.
type fleetResult struct {
	offered, admitted, refused, other int64
	offered2, admitted2               int64
	roundTrips2                       float64 // the round trips in the second half
}

// offerFleet offers key's requests at rate a second for d, open loop,
// round robin over apis, and counts the answers.
func offerFleet(t *testing.T, apis []string, key string, rate float64, d time.Duration, hold bool, roundTrips func() float64) fleetResult {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var res fleetResult
	var admitted, refused, other, admitted2 atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	half, mid := false, 0.0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			res.admitted, res.refused, res.other = admitted.Load(), refused.Load(), other.Load()
			res.admitted2, res.roundTrips2 = admitted2.Load(), roundTrips()-mid
			return res
		case <-tick.C:
		}
		if !half && time.Since(start) >= d/2 {
			half, mid = true, roundTrips()
		}
		res.offered++
		second := half
		if second {
			res.offered2++
		}
		api := apis[i%len(apis)]
		wg.Go(func() {
			// Not the offer's context: a request admitted near its end
			// finishes and is counted.
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, api+"/v1/chat/completions", strings.NewReader(fleetBody(hold)))
			if err != nil {
				other.Add(1)
				return
			}
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				admitted.Add(1)
				if second {
					admitted2.Add(1)
				}
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				other.Add(1)
			}
		})
	}
}

// arrivalLog records when the provider received each held request.
type arrivalLog struct {
	mu sync.Mutex
	at []time.Time // guarded by mu
}

func (a *arrivalLog) add(t time.Time) {
	a.mu.Lock()
	a.at = append(a.at, t)
	a.mu.Unlock()
}

func (a *arrivalLog) reset() {
	a.mu.Lock()
	a.at = nil
	a.mu.Unlock()
}

// most is the most requests in progress at the provider at once, each
// lasting hold from its arrival.
func (a *arrivalLog) most(hold time.Duration) int {
	a.mu.Lock()
	at := slices.Clone(a.at)
	a.mu.Unlock()
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	most := 0
	for i, start := 0, 0; i < len(at); i++ {
		for at[start].Add(hold).Before(at[i]) || at[start].Add(hold).Equal(at[i]) {
			start++
		}
		most = max(most, i-start+1)
	}
	return most
}
