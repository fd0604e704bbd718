package limits_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// sentinelSet is a replicated Redis the test started on loopback ports
// from deploy/redis's files: a primary, a replica of it, and three
// Sentinels watching them, each a redis-server process.
type sentinelSet struct {
	primary, replica string   // host:port
	sentinels        []string // host:port
	procs            map[string]*exec.Cmd
}

const masterName = "scootgate"

// startSentinels starts the set, or skips loudly without redis-server
// (or fails with SCOOTGATE_REQUIRE_DAEMONS=1). Sentinel is redis-server
// run with --sentinel: no other binary is needed.
func startSentinels(t *testing.T) *sentinelSet {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not installed (apt-get install redis-server; Sentinel is redis-server --sentinel)"
		if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
			t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
		}
		t.Skip("SKIPPING real-Redis Sentinel test: " + msg)
	}
	s := &sentinelSet{procs: map[string]*exec.Cmd{}}
	run := func(addr string, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.procs[addr] = cmd
		t.Cleanup(func() { s.kill(addr) })
	}
	port := func() string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	pp, rp := port(), port()
	s.primary, s.replica = "127.0.0.1:"+pp, "127.0.0.1:"+rp
	// recipe writes deploy/redis's file name with the lines that start
	// with a key of set replaced (the recipe's hosts and ports are the
	// test's), each process in a directory of its own.
	recipe := func(name string, set map[string]string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "redis", name))
		if err != nil {
			t.Fatal(err)
		}
		pdir := t.TempDir()
		set["dir "] = "dir " + pdir
		var out []string
		for line := range strings.Lines(string(data)) {
			line = strings.TrimRight(line, "\n")
			for k, v := range set {
				if strings.HasPrefix(line, k) {
					line = v
				}
			}
			out = append(out, line)
		}
		conf := filepath.Join(pdir, name)
		if err := os.WriteFile(conf, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return conf
	}
	local := map[string]string{"bind ": "bind 127.0.0.1"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(local)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	run(s.primary, recipe("primary.conf", with("port ", "port "+pp)))
	run(s.replica, recipe("replica.conf", with("port ", "port "+rp, "replicaof ", "replicaof 127.0.0.1 "+pp)))
	for range 3 {
		sp := port()
		addr := "127.0.0.1:" + sp
		s.sentinels = append(s.sentinels, addr)
		run(addr, recipe("sentinel.conf", with("port ", "port "+sp,
			"sentinel monitor ", fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 2", masterName, pp))), "--sentinel")
	}
	// Ready once the replica has synced and every Sentinel knows the
	// replica and the two other Sentinels (they find each other through
	// the primary, every 2 s): only then can they agree on a failover.
	s.await(t, 30*time.Second, "the replica synced and the Sentinels acquainted", func() bool {
		info, err := redisCmd(s.replica, "INFO", "replication")
		if err != nil || !strings.Contains(info[0], "master_link_status:up") {
			return false
		}
		for _, a := range s.sentinels {
			reps, err1 := redisCmd(a, "SENTINEL", "REPLICAS", masterName)
			sens, err2 := redisCmd(a, "SENTINEL", "SENTINELS", masterName)
			if err1 != nil || err2 != nil || len(reps) == 0 || countEntries(sens) != 2 {
				return false
			}
		}
		return true
	})
	return s
}

func (s *sentinelSet) kill(addr string) {
	if cmd := s.procs[addr]; cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		delete(s.procs, addr)
	}
}

// master asks a Sentinel which address is the primary.
func (s *sentinelSet) master(sentinel string) string {
	v, err := redisCmd(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName)
	if err != nil || len(v) != 2 {
		return ""
	}
	return v[0] + ":" + v[1]
}

// await polls cond (real daemons: nothing to hook into) until it holds
// or d has passed.
func (s *sentinelSet) await(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countEntries counts the entries of a flattened SENTINEL SENTINELS
// answer (each entry a run of name/value pairs starting with "name").
func countEntries(flat []string) int {
	n := 0
	for i := 0; i < len(flat); i += 2 {
		if flat[i] == "name" {
			n++
		}
	}
	return n
}

// redisCmd sends one command (RESP2) and returns the answer flattened to
// strings: a bulk or simple string as one, an array's elements in order
// (nested arrays flattened).
func redisCmd(addr string, args ...string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var out []string
	var read func() error
	read = func() error {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch line[0] {
		case '+', ':':
			out = append(out, line[1:])
		case '-':
			return fmt.Errorf("redis: %s", line[1:])
		case '$':
			n, _ := strconv.Atoi(line[1:])
			if n < 0 {
				return nil
			}
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			out = append(out, string(buf[:n]))
		case '*':
			n, _ := strconv.Atoi(line[1:])
			for range n {
				if err := read(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, read()
}

// TestSentinelFailover: four nodes reach a replicated Redis through its
// Sentinels; a key is held at its requests per minute by 5× its demand;
// the primary is killed. The Sentinels promote the replica, every
// node's store follows them to it, and over the whole run the fleet
// admits what the bucket allows plus at most the documented overshoot
// (docs/limits.md "A replicated Redis"), which the test logs.
func TestSentinelFailover(t *testing.T) {
	s := startSentinels(t)
	const (
		nodes = 4
		limit = 1200 // 20 a second; a lease of 60
		lease = limit / 20
	)
	type fnode struct {
		store *limits.Redis
		sub   *limits.Subject
		downs int
	}
	var (
		ns []*fnode
		mu sync.Mutex // guards downs
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range nodes {
		n := &fnode{}
		n.store = limits.NewRedis(limits.RedisOptions{
			SentinelAddrs: s.sentinels, MasterName: masterName,
			Timeout: 500 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			HealthInterval: 200 * time.Millisecond,
			OnChange: func(up bool) {
				if !up {
					mu.Lock()
					n.downs++
					mu.Unlock()
				}
			},
		})
		l := limits.New(limits.Options{Clock: time.Now, Fleet: n.store, OnFailure: limits.FailLocal, Share: 1.0 / nodes})
		b := l.Bind()
		n.sub = b.Subject("k1", "t1", authsnap.Limits{RequestsPerMinute: limit}, authsnap.Limits{})
		b.Done()
		wg.Go(func() { n.store.Run(ctx) })
		ns = append(ns, n)
	}
	allUp := func() bool {
		for _, n := range ns {
			if !n.store.Up() {
				return false
			}
		}
		return true
	}
	s.await(t, 10*time.Second, "every node's store up", allUp)

	admit := func(n *fnode) bool {
		tk, _, ok := n.sub.Admit(time.Now())
		if ok {
			tk.Release()
		}
		return ok
	}
	// Spend the bucket's initial minute, so that the run is at the limit.
	for round := 1; round > 0; {
		round = 0
		for _, n := range ns {
			if admit(n) {
				round++
			}
		}
	}
	// Then 100 requests a second offered (5× the limit), spread over the
	// nodes, for 4 s, through the failover, and 5 s after every node is
	// back on the new primary.
	var (
		admitted, offered int
		killed, promoted  time.Time
		backUp            time.Time
	)
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		now := <-tick.C
		n := ns[i%nodes]
		offered++
		if admit(n) {
			admitted++
		}
		switch {
		case killed.IsZero() && now.Sub(start) > 4*time.Second:
			killed = time.Now()
			s.kill(s.primary)
		case !killed.IsZero() && promoted.IsZero() && i%10 == 0 && s.master(s.sentinels[0]) == s.replica:
			promoted = time.Now()
		case !promoted.IsZero() && backUp.IsZero() && allUp():
			backUp = time.Now()
		case !backUp.IsZero() && now.Sub(backUp) > 5*time.Second:
		default:
			if now.Sub(start) > 60*time.Second {
				t.Fatalf("no failover within a minute: promoted %v, back up %v", !promoted.IsZero(), !backUp.IsZero())
			}
			continue
		}
		if !backUp.IsZero() && now.Sub(backUp) > 5*time.Second {
			break
		}
	}
	elapsed := time.Since(start)
	allowance := float64(limit) * elapsed.Minutes()
	bound := nodes * (1.5*lease + 1)
	over := float64(admitted) - allowance
	mu.Lock()
	downs := 0
	for _, n := range ns {
		downs += n.downs
	}
	mu.Unlock()
	t.Logf("%.1fs at %d rpm, %d offered: admitted %d against the bucket's %.0f (%+.0f, %+.1f%%); primary killed at %.1fs, replica promoted %.1fs later, every node back on it %.1fs after the kill; %d store-down events",
		elapsed.Seconds(), limit, offered, admitted, allowance, over, 100*over/allowance,
		killed.Sub(start).Seconds(), promoted.Sub(killed).Seconds(), backUp.Sub(killed).Seconds(), downs)
	if over > bound {
		t.Errorf("the fleet admitted %d, %.0f over the bucket's %.0f; want at most the leases the nodes hold, %.0f", admitted, over, allowance, bound)
	}
	// The fleet's bucket is on the new primary.
	if v, err := redisCmd(s.replica, "HGET", "scootgate:limits:k:k1:requests", "l"); err != nil || len(v) != 1 {
		t.Errorf("the fleet's bucket on the promoted replica: %v, %v", v, err)
	}
}
