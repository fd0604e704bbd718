package limits

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/scootgate/scootgate/internal/secret"
)

// Failure is what a node does while its Redis store is unreachable
// (docs/limits.md "Fleet-wide: the redis store").
type Failure uint8

// Failure modes.
const (
	// FailLocal enforces the node's local share, as the local store does.
	FailLocal Failure = iota
	// FailOpen enforces no requests or tokens per minute; max_concurrent
	// falls back to the node's share.
	FailOpen
	// FailClosed refuses every limited request (KindStore).
	FailClosed
)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	Address string // host:port; unused with SentinelAddrs
	// SentinelAddrs, when set, are Redis Sentinels (host:port) asked for
	// the primary of the master set MasterName; the client follows
	// their failovers (docs/limits.md "A replicated Redis").
	SentinelAddrs []string
	MasterName    string
	Username      string        // "" = the default user
	Password      secret.Secret // zero = none; revealed only into the AUTH handshake
	TLS           *tls.Config   // nil = plaintext
	// Timeout bounds one lease take and one probe; 0 means 1s. A take
	// that times out marks the store down.
	Timeout time.Duration
	// MaxBackoff caps the wait between probes while the store is down;
	// 0 means 5s.
	MaxBackoff time.Duration
	// HealthInterval is how often Run probes the store while it is up,
	// so that a node that takes nothing (no limited request, or leases
	// that last) still notices an outage; 0 means 1s. With the 1s
	// Timeout, /readyz says "down" within 2s of Redis dying.
	HealthInterval time.Duration
	// OnChange, if set, is told each time the store goes up or down
	// (from the store's own goroutines; it must not block).
	OnChange func(up bool)
	Logger   *slog.Logger // nil = slog.Default()
}

// Redis is the fleet's shared store of limits: one token bucket per
// limited key or tenant and kind, in a Redis hash, from which nodes take
// leases (docs/limits.md). Run keeps it connected; while it is down a
// Limiter that uses it falls back to its Failure mode.
type Redis struct {
	o    RedisOptions
	log  *slog.Logger
	wake chan struct{} // a take failed: probe now

	mu     sync.Mutex
	client rueidis.Client // guarded by mu; nil until the first dial succeeds

	holders []*Limiter    // guarded by mu; whose concurrency holds Run refreshes
	refresh time.Duration // how often Run refreshes them: holdRefresh (tests set it)

	up    atomic.Bool
	gen   atomic.Uint64 // counts the times the store came up: holds of an earlier one are stale
	calls atomic.Int64  // round trips to Redis: lease takes, slot takes, refreshes
}

// NewRedis returns a store that is down until Run connects it.
func NewRedis(o RedisOptions) *Redis {
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Redis{o: o, log: o.Logger, wake: make(chan struct{}, 1), refresh: holdRefresh}
}

// Up reports whether the store answered its last take or probe.
func (r *Redis) Up() bool { return r.up.Load() }

// Calls returns how many round trips to Redis the store made (lease
// takes, concurrency slot takes, hold refreshes, budget reads, charges
// and grants; not probes): scootgate_limits_store_round_trips_total.
func (r *Redis) Calls() int64 { return r.calls.Load() }

// Address is the store's host:port, or its Sentinel master set and
// Sentinels, for status lines.
func (r *Redis) Address() string { return r.o.describe() }

func (o RedisOptions) describe() string {
	if len(o.SentinelAddrs) == 0 {
		return o.Address
	}
	return o.MasterName + " (sentinels " + strings.Join(o.SentinelAddrs, ",") + ")"
}

// Run connects the store and, whenever a take or a health probe
// (every HealthInterval while up) fails, probes Redis with exponential
// backoff until it answers again; it returns, closing the connection,
// when ctx ends. Nothing else reconnects: the node needs no
// restart when Redis comes back. Meanwhile it refreshes, every
// holdRefresh, the concurrency slots the limiters using the store hold
// (docs/limits.md "max_concurrent across the fleet"): a node that stops
// refreshing, because it crashed, loses them after holdTTL.
func (r *Redis) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.refreshLoop(ctx) })
	defer func() {
		r.dropClient()
		r.setUp(false)
	}()
	const minBackoff = 50 * time.Millisecond
	backoff := minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	connected := false // the client answered since it was dialled
	for {
		if r.up.Load() {
			timer.Reset(r.o.HealthInterval)
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				timer.Stop()
			case <-timer.C:
				if r.probe(ctx) != nil && ctx.Err() == nil {
					r.setUp(false)
				}
			}
			continue
		}
		if connected {
			// The store went down: the client's other pipelined
			// connections may be to a Redis that has since restarted,
			// and would each fail once on first use after the probe
			// said up. Dial afresh.
			r.dropClient()
			connected = false
		}
		err := r.probe(ctx)
		if err == nil {
			connected = true
			r.setUp(true)
			backoff = minBackoff
			continue
		}
		if ctx.Err() != nil {
			return
		}
		timer.Reset(backoff)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, r.o.MaxBackoff)
	}
}

// dropClient closes the client; the next probe dials a new one. Takes
// that still hold the old one fail, as they would on a store that is
// down.
func (r *Redis) dropClient() {
	r.mu.Lock()
	c := r.client
	r.client = nil
	r.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// connected returns the client takes use, nil while none is dialled
// (the store is down).
func (r *Redis) connected() rueidis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client
}

// sentinelRefresh is how often a client through Sentinel asks them which
// primary to use, besides following their failover announcements.
const sentinelRefresh = 5 * time.Second

// probe dials if there is no client yet, then sends a PING.
func (r *Redis) probe(ctx context.Context) error {
	c := r.connected()
	if c == nil {
		var err error
		opt := rueidis.ClientOption{
			InitAddress:       []string{r.o.Address},
			Username:          r.o.Username,
			Password:          r.o.Password.Reveal(),
			TLSConfig:         r.o.TLS,
			ForceSingleClient: true,
			// Leases need no client-side caching (RESP3 tracking).
			DisableCache:     true,
			ConnWriteTimeout: r.o.Timeout,
			Dialer:           net.Dialer{Timeout: r.o.Timeout},
		}
		if len(r.o.SentinelAddrs) > 0 {
			opt.InitAddress = r.o.SentinelAddrs
			opt.Sentinel = rueidis.SentinelOption{
				MasterSet: r.o.MasterName,
				TLSConfig: r.o.TLS,
				Dialer:    net.Dialer{Timeout: r.o.Timeout},
				// Besides the +switch-master events: a missed event
				// would otherwise bind the client to a demoted primary.
				TopologyRefreshInterval: sentinelRefresh,
			}
		}
		c, err = rueidis.NewClient(opt)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.client = c
		r.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

func (r *Redis) setUp(up bool) {
	if up && !r.up.Load() {
		// Before Up reads true: an admission that sees the store up
		// sees the new generation too.
		r.gen.Add(1)
	}
	if r.up.Swap(up) == up {
		return
	}
	if up {
		r.log.Info("limits store up: fleet-wide limits", "store", "redis", "address", r.o.describe())
	} else {
		r.log.Warn("limits store unreachable: falling back", "store", "redis", "address", r.o.describe())
	}
	if r.o.OnChange != nil {
		r.o.OnChange(up)
	}
}

// markDown records a failed take and wakes Run to probe.
func (r *Redis) markDown() {
	r.setUp(false)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// errStoreDown is a take attempted while there is no connection.
var errStoreDown = errors.New("limits: redis store is down")

// takeScript takes a lease from one fleet bucket, atomically: it refills
// the bucket to the caller's now (a bucket of capacity cap that refills
// cap per minute, as the local store's; an absent key is a full bucket),
// subtracts the debt the node reports (tokens it spent beyond its
// leases), and grants up to want whole units of what is left. The caller
// passes now so that the bucket follows the nodes' clocks, never
// Redis's; a node whose clock is behind the last refill refills nothing.
// The key expires once the bucket would be full again (plus a minute for
// clock skew between nodes): an expired key and a full bucket are the
// same, so leased budget left unused is never handed back.
//
// KEYS[1] the bucket; ARGV cap, now (ms), debt, want.
// Returns {granted, floor(level after), ms until one unit is there}.
const takeScript = `
local cap = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local debt = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local v = redis.call('HMGET', KEYS[1], 'l', 't')
local level, at = cap, now
if v[1] and v[2] then
  level = tonumber(v[1])
  at = tonumber(v[2])
end
if now > at then
  level = level + (now - at) * cap / 60000
  at = now
end
if level > cap then level = cap end
level = level - debt
local grant = 0
if level >= 1 then grant = math.min(want, math.floor(level)) end
level = level - grant
local wait = 0
if level < 1 then wait = math.ceil((1 - level) * 60000 / cap) end
redis.call('HSET', KEYS[1], 'l', string.format('%.17g', level), 't', string.format('%d', at))
redis.call('PEXPIRE', KEYS[1], math.ceil((cap - level) * 60000 / cap) + 60000)
return {grant, math.floor(level), wait}
`

var takeLua = rueidis.NewLuaScript(takeScript)

// take runs takeScript (EVALSHA, EVAL once per connection when Redis does
// not know the script yet). An error marks the store down.
func (r *Redis) take(ctx context.Context, key string, capacity, nowMS, debt, want int64) (grant, level int64, wait time.Duration, err error) {
	c := r.connected()
	if c == nil {
		return 0, 0, 0, errStoreDown
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	args := []string{
		strconv.FormatInt(capacity, 10), strconv.FormatInt(nowMS, 10),
		strconv.FormatInt(debt, 10), strconv.FormatInt(want, 10),
	}
	var vs []int64
	// Once more on a connection error: the first command after Redis
	// came back may meet the connection Redis dropped. If the first run
	// did reach Redis, the retry takes twice: the fleet admits less,
	// never more.
	for try := 0; try < 2; try++ {
		r.calls.Add(1)
		vs, err = takeLua.Exec(ctx, c, []string{key}, args).AsIntSlice()
		if _, redisErr := rueidis.IsRedisErr(err); err == nil || redisErr || ctx.Err() != nil {
			break
		}
	}
	if err == nil && len(vs) != 3 {
		err = errors.New("limits: unexpected lease script reply")
	}
	if err != nil {
		r.markDown()
		return 0, 0, 0, err
	}
	return vs[0], vs[1], time.Duration(vs[2]) * time.Millisecond, nil
}
