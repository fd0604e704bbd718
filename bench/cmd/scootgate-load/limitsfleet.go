package main

// `scootgate-load limits` is the fleet measurement of the redis store of
// limits (docs/limits.md "Fleet-wide: the redis store"): -nodes nodes in
// this process, each a limits.Limiter with its own limits.Redis client
// (its own connection) to one redis-server on loopback, offer one key
// -offer times its requests per minute, spread evenly, for -duration;
// midway the redis-server is killed (SIGKILL) and restarted on the same
// port. It reports what the fleet admitted against the bucket's
// allowance, per phase, the round trips to Redis per request, the time
// Admit adds (read around the call) and the most
// requests in progress against max_concurrent. Nodes are in-process, not
// processes: the limiter is what is measured, and ten full nodes with
// their HTTP stacks would measure the 2-core machine instead.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/usd"
)

type limitsOptions struct {
	nodes     int
	rpm       int64
	conc      int64
	offer     float64
	rate      float64
	duration  time.Duration
	killAt    time.Duration
	outage    time.Duration
	hold      time.Duration
	persisted bool
	// A day budget on the key (docs/limits.md "Budgets"): -offer times
	// it offered over the run, each request's worst case the same share
	// of it, each costing between half and all of it.
	usdPerDay  string
	budgetMode string
	budget     usd.Amount
	worst      usd.Amount
}

func runLimits(args []string) error {
	var o limitsOptions
	fs := flag.NewFlagSet("limits", flag.ContinueOnError)
	fs.IntVar(&o.nodes, "nodes", 10, "in-process nodes, each with its own Redis client")
	fs.Int64Var(&o.rpm, "rpm", 6000, "the key's requests_per_minute")
	fs.Int64Var(&o.conc, "max-concurrent", 60, "the key's max_concurrent")
	fs.Float64Var(&o.offer, "offer", 5, "offered load as a multiple of -rpm")
	fs.Float64Var(&o.rate, "rate", 0, "offered requests per second, over all nodes (0 = -offer × -rpm)")
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "how long to offer it")
	fs.DurationVar(&o.killAt, "kill-at", 90*time.Second, "when to kill redis-server (0 = never)")
	fs.DurationVar(&o.outage, "outage", 3*time.Second, "how long redis-server stays down")
	fs.DurationVar(&o.hold, "hold", 100*time.Millisecond, "how long an admitted request stays in progress")
	fs.BoolVar(&o.persisted, "aof", true, "run redis-server with appendonly (fsync always), so a restart keeps the buckets")
	fs.StringVar(&o.usdPerDay, "usd-per-day", "", "a day budget on the key, in USD; -offer then multiplies it (set -rate, and -rpm out of the way)")
	fs.StringVar(&o.budgetMode, "budget-mode", "", `the budget's mode: "charge" (default) or "reserve"`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.rate == 0 {
		o.rate = o.offer * float64(o.rpm) / 60
	}
	if o.usdPerDay != "" {
		var err error
		if o.budget, err = usd.ParseBudget(o.usdPerDay); err != nil {
			return fmt.Errorf("-usd-per-day: %w", err)
		}
		// offer × budget over the run's requests.
		o.worst = usd.Amount(float64(o.budget) * o.offer / (o.rate * o.duration.Seconds()))
	}
	if o.nodes < 1 || o.rpm < 1 || o.conc < 1 || o.offer <= 0 || o.duration <= 0 {
		return errors.New("-nodes, -rpm, -max-concurrent, -offer and -duration must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := measureLimits(ctx, o)
	if res != nil {
		fmt.Print(res.markdown(o))
	}
	return err
}

// redisProc is the redis-server the measurement kills and restarts.
type redisProc struct {
	args []string
	cmd  *exec.Cmd
	addr string
}

func (r *redisProc) start() error {
	r.cmd = exec.Command(r.args[0], r.args[1:]...)
	if err := r.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("redis-server did not listen within 10s")
}

func (r *redisProc) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// limitsResult is what measureLimits saw.
type limitsResult struct {
	offered, admitted, refusedStore int64
	spent                           usd.Amount // with a budget: what the admitted requests cost
	perSecond                       []int64    // admitted in each second of the run
	roundTrips                      int64
	latencies                       []time.Duration // of every Admit
	mostInProgress                  int64
	mostPerSecond                   []int64
	killedAt, upAgainAt             time.Duration // since the start; 0 = no kill
	wall                            time.Duration
}

func measureLimits(ctx context.Context, o limitsOptions) (*limitsResult, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "scootgate-limits-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rp := &redisProc{addr: "127.0.0.1:" + strconv.Itoa(port),
		args: []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir}}
	if o.persisted {
		rp.args = append(rp.args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		rp.args = append(rp.args, "--appendonly", "no")
	}
	if err := rp.start(); err != nil {
		return nil, err
	}
	defer rp.kill()

	quiet := slog.New(slog.DiscardHandler)
	lim := authsnap.Limits{RequestsPerMinute: o.rpm, MaxConcurrent: o.conc, USDPerDay: o.usdPerDay, BudgetMode: o.budgetMode}
	type fleetNode struct {
		store *limits.Redis
		sub   *limits.Subject
	}
	nodes := make([]fleetNode, o.nodes)
	runCtx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { cancel(); bg.Wait() }()
	for i := range nodes {
		ups := make(chan bool, 64)
		store := limits.NewRedis(limits.RedisOptions{Address: rp.addr, Logger: quiet, OnChange: func(up bool) {
			select {
			case ups <- up:
			default:
			}
		}})
		bg.Go(func() { store.Run(runCtx) })
		select {
		case <-ups:
		case <-time.After(10 * time.Second):
			return nil, errors.New("a node's store did not come up")
		}
		l := limits.New(limits.Options{Fleet: store, Share: 1 / float64(o.nodes), OnFailure: limits.FailLocal})
		b := l.Bind()
		nodes[i] = fleetNode{store: store, sub: b.Subject("k_fleet", "t_fleet", lim, authsnap.Limits{})}
		b.Done()
	}

	res := &limitsResult{perSecond: make([]int64, int(o.duration/time.Second)+2), mostPerSecond: make([]int64, int(o.duration/time.Second)+2)}
	var inProgress atomic.Int64
	var mu sync.Mutex // guards res.latencies, res.mostInProgress
	start := time.Now()
	// Each node gets the offered rate / nodes, open loop: a request every
	// interval, whatever happened to the last one.
	interval := time.Duration(float64(time.Second) * float64(o.nodes) / o.rate)
	var load sync.WaitGroup
	var offered, admitted, refusedStore, spent atomic.Int64
	perSecond := make([]atomic.Int64, len(res.perSecond))
	for i, n := range nodes {
		load.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			// Nodes start staggered over one interval.
			time.Sleep(interval * time.Duration(i) / time.Duration(len(nodes)))
			var lat []time.Duration
			for {
				select {
				case <-runCtx.Done():
					mu.Lock()
					res.latencies = append(res.latencies, lat...)
					mu.Unlock()
					return
				case <-t.C:
				}
				since := time.Since(start)
				if since >= o.duration {
					mu.Lock()
					res.latencies = append(res.latencies, lat...)
					mu.Unlock()
					return
				}
				offered.Add(1)
				t0 := time.Now()
				tk, st, ok := n.sub.AdmitReserve(t0, o.worst)
				d := time.Since(t0)
				if !ok {
					if st.Kind == limits.KindStore {
						refusedStore.Add(1)
					}
					lat = append(lat, d)
					continue
				}
				admitted.Add(1)
				perSecond[int(since/time.Second)].Add(1)
				c := inProgress.Add(1)
				mu.Lock()
				res.mostInProgress = max(res.mostInProgress, c)
				sec := int(since / time.Second)
				res.mostPerSecond[sec] = max(res.mostPerSecond[sec], c)
				mu.Unlock()
				// Between half and all of the worst case, by the
				// request's number.
				cost := o.worst/2 + o.worst/2*usd.Amount(offered.Load()%11)/10
				time.AfterFunc(o.hold, func() {
					inProgress.Add(-1) // before the slot is free: never counts more than are held
					if cost > 0 {
						tk.Charge(time.Now(), cost)
						spent.Add(int64(cost))
					}
					tk.Release()
				})
				lat = append(lat, d)
			}
		})
	}
	if o.killAt > 0 && o.killAt < o.duration {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(o.killAt))):
			rp.kill()
			res.killedAt = time.Since(start)
			time.Sleep(o.outage)
			if err := rp.start(); err != nil {
				cancel()
				load.Wait()
				return nil, err
			}
			// Up again when every node's store says so.
			for {
				all := true
				for _, n := range nodes {
					all = all && n.store.Up()
				}
				if all || time.Since(start) > o.duration {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			res.upAgainAt = time.Since(start)
		}
	}
	load.Wait()
	res.wall = time.Since(start)
	res.offered, res.admitted, res.refusedStore = offered.Load(), admitted.Load(), refusedStore.Load()
	res.spent = usd.Amount(spent.Load())
	for i := range perSecond {
		res.perSecond[i] = perSecond[i].Load()
	}
	for _, n := range nodes {
		res.roundTrips += n.store.Calls()
	}
	slices.Sort(res.latencies)
	return res, ctx.Err()
}

func (r *limitsResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

// window sums the admitted requests in seconds [from, to).
func (r *limitsResult) window(from, to int) int64 {
	var n int64
	for s := max(0, from); s < min(to, len(r.perSecond)); s++ {
		n += r.perSecond[s]
	}
	return n
}

const outageRow = "outage (redis down: local shares) and reconnection"

func (r *limitsResult) markdown(o limitsOptions) string {
	perSec := float64(o.rpm) / 60
	lease := max(1, o.rpm/20)
	bound := int64(o.nodes) * (lease + lease/2 + 1)
	allowance := float64(o.rpm) + float64(o.rpm)*r.wall.Minutes()
	var b []byte
	p := func(format string, a ...any) { b = fmt.Appendf(b, format, a...) }
	p("## Fleet limits: %d nodes, one key: %d rpm, max_concurrent %d, %.0f requests/s offered, each in progress %s\n\n", o.nodes, o.rpm, o.conc, o.rate, o.hold)
	p("| measure | value |\n|---|---|\n")
	p("| run | %s, %d requests offered (%.0f/s) |\n", r.wall.Round(time.Second), r.offered, float64(r.offered)/r.wall.Seconds())
	if o.budget > 0 {
		// The budget binds, not the requests per minute.
		p("| admitted, whole run | %d |\n", r.admitted)
	} else {
		p("| admitted, whole run | %d; the bucket's allowance (limit + refill) %.0f: %+.1f %% (lease bound ±%d, outage fallback on top) |\n",
			r.admitted, allowance, 100*(float64(r.admitted)/allowance-1), bound)
	}
	steadyTo := int(r.wall / time.Second)
	if r.killedAt > 0 {
		steadyTo = int(r.killedAt / time.Second)
	}
	// From 20 s on the initial burst allowance is spent at ×5.
	row := func(name string, from, to int) {
		if o.budget > 0 || to-from < 1 || to-from < 5 && name != outageRow {
			return
		}
		got := r.window(from, to)
		want := perSec * float64(to-from)
		p("| admitted, %s (s %d–%d) | %d of %.0f at the limit: %+.2f %% |\n", name, from, to, got, want, 100*(float64(got)/want-1))
	}
	row("steady, before the kill", 20, steadyTo)
	if r.killedAt > 0 {
		k, u := int(r.killedAt/time.Second), int((r.upAgainAt+time.Second-1)/time.Second)
		row(outageRow, k, u)
		for s := u; s+5 <= u+30 && s+5 <= len(r.perSecond)-1; s += 5 {
			row("after the restart", s, s+5)
		}
		row("steady, after the restart", u+10, int(r.wall/time.Second))
		p("| redis-server killed at / every node back | %s / %s |\n", r.killedAt.Round(time.Millisecond), r.upAgainAt.Round(time.Millisecond))
	}
	if o.budget > 0 {
		mode := o.budgetMode
		if mode == "" {
			mode = "charge"
		}
		p("| budget (%s), offered ×%.0f, worst case a request | $%s a day; $%s |\n", mode, o.offer, o.budget, o.worst)
		p("| spent by the admitted requests | $%s: %+.3f %% of the budget |\n", r.spent, 100*(float64(r.spent)/float64(o.budget)-1))
	}
	p("| requests refused because of the store | %d |\n", r.refusedStore)
	p("| round trips to Redis | %d: %.4f per offered request, %.4f per admitted |\n", r.roundTrips,
		float64(r.roundTrips)/float64(r.offered), float64(r.roundTrips)/float64(max(1, r.admitted)))
	p("| Admit (the limiter's added latency) | p50 %s, p99 %s, p99.9 %s, max %s |\n",
		r.quantile(0.5), r.quantile(0.99), r.quantile(0.999), r.quantile(1))
	p("| most requests in progress | %d (max_concurrent %d) |\n", r.mostInProgress, o.conc)
	if r.killedAt > 0 {
		// Outside the outage and the 5 s after (holds of nodes that
		// were cut off expire then).
		var most int64
		k, u := int(r.killedAt/time.Second), int(r.upAgainAt/time.Second)+5
		for s, m := range r.mostPerSecond {
			if s < k || s > u {
				most = max(most, m)
			}
		}
		p("| most in progress, outage ±5 s left out | %d |\n", most)
	}
	return string(b)
}
