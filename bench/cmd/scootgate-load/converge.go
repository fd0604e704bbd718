package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// The fleet convergence benchmark (`scootgate-load converge`, `make
// bench-fleet`): how long a publish takes to reach every node of a fleet.
//
// It starts the dev control plane (internal/devstack/cpserver, which holds
// long polls) in this process and -nodes node processes (-role=node, the
// real node: config.Load and app.Run), all on 127.0.0.1, each pulling
// both snapshots from it with -long-poll. Then, -rounds times, it
// publishes a routing snapshot with a new version, and an authorization
// snapshot that revokes the key of the previous round, by atomic rename,
// and reads from each node's JSON log when it applied that version (the
// time of its "snapshot applied" line; all processes share the machine's
// clock). After each revocation it sends the revoked key to every node and
// requires 401 from all of them. It prints p50, p99 and max of publish →
// applied over all nodes and rounds, per kind.

// convergeOptions are the converge flags.
type convergeOptions struct {
	nodes        int
	rounds       int
	longPoll     time.Duration
	pollInterval time.Duration
	timeout      time.Duration // per publish, for every node to apply it
	keep         bool
	signed       bool // publish DSSE envelopes; nodes require them (verify_keys)
}

func runConverge(args []string) error {
	var o convergeOptions
	fs := flag.NewFlagSet("converge", flag.ContinueOnError)
	fs.IntVar(&o.nodes, "nodes", 50, "node processes")
	fs.IntVar(&o.rounds, "rounds", 5, "publishes of each kind")
	fs.DurationVar(&o.longPoll, "long-poll", 30*time.Second, "the nodes' control_plane.long_poll (0 = off: plain polling)")
	fs.DurationVar(&o.pollInterval, "poll-interval", 10*time.Second, "the nodes' control_plane.poll_interval")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long every node may take to apply one publish")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, node logs)")
	fs.BoolVar(&o.signed, "signed", false, "publish signed snapshots; the nodes require the signature (verify_keys)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.nodes < 1 || o.rounds < 1 || o.timeout <= 0 || o.pollInterval < time.Second || o.longPoll < 0 || o.longPoll%time.Second != 0 {
		return errors.New("-nodes, -rounds and -timeout must be positive, -poll-interval at least 1s, -long-poll whole seconds")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp("", "scootgate-converge-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "work directory:", work)
	} else {
		defer os.RemoveAll(work)
	}
	res, err := converge(ctx, o, work)
	if res != nil {
		fmt.Print(res.markdown(o))
	}
	return err
}

// convergeResult holds publish → applied latencies, per kind.
type convergeResult struct {
	routes, authz []time.Duration
	refused       int // revoked-key requests answered 401
	started       time.Duration
}

func converge(ctx context.Context, o convergeOptions, work string) (*convergeResult, error) {
	cpDir := filepath.Join(work, "cp")
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return nil, err
	}
	pub := &publisher{dir: cpDir}
	if o.signed {
		pk, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		pub.key = key
		if err := os.WriteFile(filepath.Join(work, "cp.pub"), snapsign.MarshalPublicKey(pk), 0o600); err != nil {
			return nil, err
		}
	}
	if err := pub.publish("routes.json", fleetRoutes(1)); err != nil {
		return nil, err
	}
	if err := pub.publish("authz.json", fleetAuthz(1)); err != nil {
		return nil, err
	}
	cp, err := cpserver.Listen("127.0.0.1:0", cpDir)
	if err != nil {
		return nil, err
	}
	defer cp.Close()

	// Start the nodes, a few at a time: each start reads two snapshots.
	t0 := time.Now()
	nodes := make([]*fleetNode, o.nodes)
	var mu sync.Mutex
	var startErr error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			n, err := startFleetNode(ctx, o, work, cp, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				startErr = errors.Join(startErr, err)
				return
			}
			nodes[i] = n
		})
	}
	wg.Wait()
	defer func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n != nil {
				wg.Go(n.child.stop)
			}
		}
		wg.Wait()
	}()
	if startErr != nil {
		return nil, startErr
	}
	res := &convergeResult{started: time.Since(t0)}
	fmt.Fprintf(os.Stderr, "%d nodes up in %s\n", o.nodes, res.started.Round(time.Millisecond))

	for round := 1; round <= o.rounds; round++ {
		version := uint64(round + 1)
		// Routes: a new version of the same routes.
		at := time.Now()
		if err := pub.publish("routes.json", fleetRoutes(version)); err != nil {
			return res, err
		}
		lat, err := waitApplied(ctx, nodes, "routes", version, at, o.timeout)
		res.routes = append(res.routes, lat...)
		if err != nil {
			return res, err
		}
		// Authz: revoke this round's key (the previous key is gone
		// already), so the revoked key must be refused everywhere.
		revoked := fleetKey(round)
		if n, err := countStatus(ctx, nodes, revoked, http.StatusUnauthorized); err != nil || n != 0 {
			return res, fmt.Errorf("round %d: before the revocation, %d nodes already refuse the key (%v)", round, n, err)
		}
		at = time.Now()
		if err := pub.publish("authz.json", fleetAuthz(version)); err != nil {
			return res, err
		}
		lat, err = waitApplied(ctx, nodes, "authz", version, at, o.timeout)
		res.authz = append(res.authz, lat...)
		if err != nil {
			return res, err
		}
		n, err := countStatus(ctx, nodes, revoked, http.StatusUnauthorized)
		if err != nil {
			return res, err
		}
		if n != len(nodes) {
			return res, fmt.Errorf("round %d: after the revocation was applied, only %d of %d nodes refuse the revoked key", round, n, len(nodes))
		}
		res.refused += n
		fmt.Fprintf(os.Stderr, "round %d/%d: routes max %s, authz max %s\n", round, o.rounds,
			slices.Max(res.routes[len(res.routes)-len(nodes):]).Round(time.Millisecond),
			slices.Max(res.authz[len(res.authz)-len(nodes):]).Round(time.Millisecond))
	}
	return res, nil
}

// fleetNode is one node process and its log.
type fleetNode struct {
	child *child
	log   string
	api   string

	mu     sync.Mutex // guards offset and seen
	offset int64      // bytes of log already read
	seen   map[string]time.Time
}

func startFleetNode(ctx context.Context, o convergeOptions, work string, cp *cpserver.Server, i int) (*fleetNode, error) {
	dir := filepath.Join(work, fmt.Sprintf("node-%02d", i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "node.toml")
	if err := os.WriteFile(cfg, []byte(fleetTOML(i, cp, o)), 0o600); err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "node.log")
	cmd, err := childCommand(pinning{}, -1, "node", []string{"-config", cfg, "-log", log},
		[]string{providerKeyEnv + "=fake-provider-key-for-load"})
	if err != nil {
		return nil, err
	}
	c, err := startChild(ctx, fmt.Sprintf("node-%02d", i), cmd, dir)
	if err != nil {
		return nil, err
	}
	return &fleetNode{child: c, log: log, api: c.ready.API, seen: map[string]time.Time{}}, nil
}

// fleetTOML is a node that pulls both snapshots from the control plane.
// Its egress proxy is never dialled: the benchmark sends no request that
// passes authorization.
func fleetTOML(i int, cp *cpserver.Server, o convergeOptions) string {
	verify := ""
	if o.signed {
		verify = `verify_keys = ["../cp.pub"]` // written by converge beside the node directories
	}
	return fmt.Sprintf(`# Generated by scootgate-load converge.
node_id = "fleet-%02d"

[listen]
api = "127.0.0.1:0"
health = "127.0.0.1:0"

[drain]
grace = "1s"

[[egress.proxies]]
name = "unused"
url = "socks5://127.0.0.1:9"

[credentials.fake]
env = %q
hosts = ["api.example.com"]

[routes]
source = %q
%s

[authz]
source = %q
%s

[control_plane]
poll_interval = %q
long_poll = %q
stale_after = "10m"
state_dir = "state"

[usage]
enabled = false
`, i, providerKeyEnv, cp.URL(cpserver.RoutesPath), verify, cp.URL(cpserver.AuthzPath), verify, o.pollInterval.String(), o.longPoll.String())
}

// fleetKey is the client key revoked in round r.
func fleetKey(r int) string { return fmt.Sprintf("sk-fleet-round-%d", r) }

// fleetAuthz is version v of the authorization snapshot: the keys of
// rounds v..v+100, so that publishing v revokes the key of round v-1.
func fleetAuthz(v uint64) authsnap.Snapshot {
	doc := authsnap.Snapshot{Schema: authsnap.Schema, Version: v, GeneratedAt: time.Now().UTC().Truncate(time.Second)}
	for r := int(v); r < int(v)+100; r++ {
		doc.Keys = append(doc.Keys, authsnap.Key{KeyID: fmt.Sprintf("k%d", r), TenantID: "fleet", Digest: authsnap.Digest(fleetKey(r))})
	}
	return doc
}

func fleetRoutes(v uint64) routesnap.Snapshot {
	return routesnap.Snapshot{
		Schema: routesnap.Schema, Version: v, GeneratedAt: time.Now().UTC().Truncate(time.Second),
		Backends: []routesnap.Backend{{
			ID: "fake", Protocol: routesnap.ProtocolOpenAI, BaseURL: "https://api.example.com/v1",
			Credential: "fake", MaxInflightPerNode: 64,
		}},
		Models: []routesnap.Model{{Name: benchModel, Targets: []routesnap.Target{
			{Backend: "fake", Model: providerModel, Weight: 1, Stream: true},
		}}},
	}
}

// publisher writes documents into the control plane's directory, signed
// when it has a key.
type publisher struct {
	dir string
	key ed25519.PrivateKey // nil: plain documents
}

// publish replaces dir/name atomically: a temporary file renamed over the
// old one, as a control plane publishes. Signing is part of the publish,
// so its cost is in the measured time.
func (p *publisher) publish(name string, doc any) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if p.key != nil {
		typ := snapsign.RoutesPayloadType
		if _, ok := doc.(authsnap.Snapshot); ok {
			typ = snapsign.AuthzPayloadType
		}
		data = snapsign.Sign(typ, data, p.key).Marshal()
	}
	tmp := filepath.Join(p.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(p.dir, name))
}

// waitApplied waits until every node has logged applying version of kind
// and returns, per node, the time from at to that log line.
func waitApplied(ctx context.Context, nodes []*fleetNode, kind string, version uint64, at time.Time, timeout time.Duration) ([]time.Duration, error) {
	key := fmt.Sprintf("%s/%d", kind, version)
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var lat []time.Duration
		for _, n := range nodes {
			if err := n.child.alive(); err != nil {
				return nil, fmt.Errorf("%w: %s", err, n.child.tail())
			}
			if t, ok := n.applied(key); ok {
				lat = append(lat, t.Sub(at))
			}
		}
		if len(lat) == len(nodes) {
			return lat, nil
		}
		if time.Now().After(deadline) {
			return lat, fmt.Errorf("%s version %d: %d of %d nodes applied it within %s", kind, version, len(lat), len(nodes), timeout)
		}
		select {
		case <-ctx.Done():
			return lat, ctx.Err()
		case <-tick.C:
		}
	}
}

// applied reads the node's log on from where it stopped and reports when
// it applied key ("routes/7").
func (n *fleetNode) applied(key string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t, ok := n.seen[key]; ok {
		return t, true
	}
	f, err := os.Open(n.log)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	if _, err := f.Seek(n.offset, io.SeekStart); err != nil {
		return time.Time{}, false
	}
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break // a partial last line is read again next time
		}
		n.offset += int64(len(line))
		if !strings.Contains(line, `"snapshot applied"`) {
			continue
		}
		var rec struct {
			Time     time.Time `json:"time"`
			Snapshot string    `json:"snapshot"`
			Version  uint64    `json:"version"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			n.seen[fmt.Sprintf("%s/%d", rec.Snapshot, rec.Version)] = rec.Time
		}
	}
	t, ok := n.seen[key]
	return t, ok
}

// countStatus sends one chat request with key to every node and counts
// the answers with status want.
func countStatus(ctx context.Context, nodes []*fleetNode, key string, want int) (int, error) {
	count := 0
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.api+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+benchModel+`","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			cancel()
			return count, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return count, fmt.Errorf("%s: %w", n.child.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode == want {
			count++
		}
	}
	return count, nil
}

// quantile returns the q-quantile (nearest rank) of sorted d.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (r *convergeResult) markdown(o convergeOptions) string {
	var b strings.Builder
	mode := fmt.Sprintf("long_poll %s", o.longPoll)
	if o.longPoll == 0 {
		mode = "no long poll"
	}
	if o.signed {
		mode += ", signed snapshots (verify_keys)"
	}
	fmt.Fprintf(&b, "## Fleet convergence: %d nodes, %s, poll_interval %s\n\n", o.nodes, mode, o.pollInterval)
	fmt.Fprintf(&b, "%d publishes of each kind; publish (atomic rename on the dev control plane) → the node's \"snapshot applied\" log line; %d nodes started in %s.\n\n",
		o.rounds, o.nodes, r.started.Round(time.Millisecond))
	b.WriteString("| document | samples | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, k := range []struct {
		name string
		d    []time.Duration
	}{{"routing snapshot", r.routes}, {"authz revocation", r.authz}} {
		d := slices.Clone(k.d)
		slices.Sort(d)
		if len(d) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | | | |\n", k.name)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k.name, len(d),
			quantile(d, 0.5).Round(time.Millisecond), quantile(d, 0.99).Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\nRevoked keys refused (401) after each revocation: %d of %d requests.\n", r.refused, len(r.authz))
	return b.String()
}
