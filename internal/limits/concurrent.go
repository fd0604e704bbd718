package limits

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// holdRefresh is how often a node refreshes the concurrency slots it
// holds in Redis, and returns those it no longer uses.
const holdRefresh = time.Second

// maxHoldRetake bounds how long a node found full leaves the fleet's
// max_concurrent alone. At a key's limit with more demand than slots,
// every node reuses the slots its own requests release, so the fleet
// stays full and a take finds nothing: up to 4 s between them (1 s
// before) cuts those takes by three quarters (BenchmarkAtLimit), at the
// price of slots another node stopped using, and returned with its
// refresh, waiting up to 4 s for a node that was refused. A crashed
// node's slots take holdTTL to come back anyway.
const maxHoldRetake = 4 * time.Second

// holdTTL is how long a node's hold outlives its last refresh: the slots
// of a node that crashed free after this. Five refreshes: a refresh that
// times out (1 s), the reconnection after it and a long GC pause all fit
// before a live node's hold lapses, yet a crash costs the fleet the
// crashed node's slots for seconds only (docs/limits.md).
const holdTTL = 5 * time.Second

// hold is what a node holds of one key's or tenant's fleet-wide
// max_concurrent: slots granted by Redis, in use (state.inflight) or
// kept for the next request until the next refresh.
type hold struct {
	held      int64         // granted by the fleet, in generation gen
	gen       uint64        // the store's generation the grant belongs to; another means nothing is held
	peak      int64         // most requests in flight since the last refresh
	pending   int64         // admissions waiting for a slot: the next take asks for them too
	fullUntil int64         // the fleet had no slot to give: no take before this
	fulls     int           // takes in a row that found the fleet full
	sending   int64         // the target of the take or refresh in flight
	fetching  chan struct{} // non-nil while a take or refresh is in flight; closed when it ends
}

// usable is how many slots an admission may fill without asking Redis.
// While a take or refresh is in flight, no more than it asks for: the
// answer may shrink the hold to that, never below (beginHoldLocked).
func (h *hold) usable(gen uint64) int64 {
	if h.gen != gen {
		return 0
	}
	if h.fetching != nil {
		return min(h.held, h.sending)
	}
	return h.held
}

// holdOp is one run of holdScript: set this node's hold of key to
// target, or as near as the limit allows, and never below floor.
type holdOp struct {
	key                  string
	limit, floor, target int64
}

// beginHoldLocked marks a take or refresh of s's hold in flight and
// returns its arguments. floor is what the node may have in use when the
// answer comes: the slots in use now, and for a take those usable
// meanwhile. A refresh's floor is the slots in use alone, and no other
// slot is usable until its answer: a hold is recorded even where it does
// not fit (after an outage), and one kept spare beyond the limit would
// otherwise be recorded again and again, and reused by new requests while
// the fleet is over its limit.
func (s *state) beginHoldLocked(gen uint64, target int64, refresh bool) (holdOp, chan struct{}) {
	floor := max(s.inflight, min(s.hold.usable(gen), target))
	if refresh {
		floor = s.inflight
	}
	op := holdOp{key: s.ckey, limit: s.full.conc, floor: floor, target: max(target, floor)}
	ch := make(chan struct{})
	s.hold.sending, s.hold.fetching = op.target, ch
	if refresh {
		s.hold.sending = floor
	}
	return op, ch
}

// endHoldLocked records the answer to a take or refresh begun with
// beginHoldLocked (granted, unless err). A take that got less than it
// asked for found the fleet full: the node refuses without asking again
// for minRetake, doubled for each take in a row that found it full, up
// to maxHoldRetake.
func (s *state) endHoldLocked(op holdOp, gen uint64, grant int64, err error, take bool, at int64) {
	if err == nil {
		s.hold.held, s.hold.gen = grant, gen
		// Only a take learns whether the fleet has slots to give: a
		// refresh leaves the wait after a full one as it is.
		switch {
		case take && grant < op.target:
			s.hold.fullUntil = at + int64(min(minRetake<<min(s.hold.fulls, 6), maxHoldRetake))
			s.hold.fulls++
		case take:
			s.hold.fullUntil, s.hold.fulls = 0, 0
		}
	}
	close(s.hold.fetching)
	s.hold.fetching = nil
}

// fetchHold asks the fleet for slots for s's requests in flight and
// those waiting, or waits for the take or refresh already in flight
// (waited).
func (l *Limiter) fetchHold(s *state, gen uint64, now time.Time) (waited bool, err error) {
	s.mu.Lock()
	if ch := s.hold.fetching; ch != nil {
		s.mu.Unlock()
		<-ch
		return true, nil
	}
	if s.full.conc == 0 {
		s.mu.Unlock() // the limit went away meanwhile
		return true, nil
	}
	op, _ := s.beginHoldLocked(gen, s.inflight+s.hold.pending, false)
	s.mu.Unlock()
	grants, err := l.fleet.hold(context.Background(), l.node, now.UnixMilli(), []holdOp{op})
	var grant int64
	if err == nil {
		grant = grants[0]
	}
	s.mu.Lock()
	s.endHoldLocked(op, gen, grant, err, true, l.since(now))
	s.mu.Unlock()
	return false, err
}

// refreshHolds renews, in one round trip, the hold of every bound key
// and tenant with a fleet-wide max_concurrent that holds or uses slots:
// the hold becomes what the node used at most since the last refresh
// (so a released slot goes back to the fleet within two refreshes), and
// its expiry is pushed holdTTL on. A hold of a generation before the
// store's last outage is set again to the requests in flight, those
// admitted during the outage included.
func (l *Limiter) refreshHolds(ctx context.Context) error {
	states := l.concStates.Load()
	if states == nil || len(*states) == 0 {
		return nil
	}
	gen := l.fleet.gen.Load()
	now := l.clock()
	var (
		ss  []*state
		ops []holdOp
	)
	for _, s := range *states {
		s.mu.Lock()
		if s.full.conc == 0 || s.hold.fetching != nil || s.hold.held == 0 && s.inflight == 0 && s.hold.peak == 0 {
			s.mu.Unlock() // nothing held, or an admission's take is at it
			continue
		}
		target := max(s.inflight, s.hold.peak)
		s.hold.peak = s.inflight
		op, _ := s.beginHoldLocked(gen, target, true)
		s.mu.Unlock()
		ss = append(ss, s)
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil
	}
	grants, err := l.fleet.hold(ctx, l.node, now.UnixMilli(), ops)
	at := l.since(now)
	for i, s := range ss {
		var grant int64
		if err == nil {
			grant = grants[i]
		}
		s.mu.Lock()
		s.endHoldLocked(ops[i], gen, grant, err, false, at)
		s.mu.Unlock()
	}
	return err
}

// newNodeID names this node's holds in Redis: random, so that two nodes
// never share one, and a restarted node starts afresh (the holds of its
// previous run expire).
func newNodeID() string { return rand.Text() }

// holdScript sets one node's hold of a key's or tenant's concurrency
// slots, atomically. The key is a hash of node id → "slots:expiry (ms)".
// It first drops the holds that expired by the caller's now (their node
// stopped refreshing: it crashed or lost Redis), then grants the node
// target slots or what the limit leaves after the other nodes' holds,
// never less than floor: slots the node has in use are recorded whether
// or not they fit (after an outage, or a lowered limit), and refuse
// others until they end. The caller passes now, so that the holds follow
// the nodes' clocks, never Redis's, as the buckets do. The key expires
// with its longest-lived hold.
//
// KEYS[1] the hash; ARGV limit, now (ms), node, floor, target, ttl (ms).
// Returns the slots granted.
const holdScript = `
local limit = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local node = ARGV[3]
local floor = tonumber(ARGV[4])
local target = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local all = redis.call('HGETALL', KEYS[1])
local others = 0
for i = 1, #all, 2 do
  if all[i] ~= node then
    local v = all[i + 1]
    local sep = string.find(v, ':', 1, true)
    if tonumber(string.sub(v, sep + 1)) <= now then
      redis.call('HDEL', KEYS[1], all[i])
    else
      others = others + tonumber(string.sub(v, 1, sep - 1))
    end
  end
end
local grant = math.min(target, limit - others)
if grant < floor then grant = floor end
if grant > 0 then
  redis.call('HSET', KEYS[1], node, string.format('%d:%d', grant, now + ttl))
else
  redis.call('HDEL', KEYS[1], node)
end
if redis.call('HLEN', KEYS[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
end
return grant
`

// holdSHA is holdScript's SHA-1, for EVALSHA.
var holdSHA = func() string {
	sum := sha1.Sum([]byte(holdScript))
	return hex.EncodeToString(sum[:])
}()

var holdLua = rueidis.NewLuaScript(holdScript)

// hold runs holdScript once per op, in one round trip (a pipeline of
// EVALSHA; EVAL once for a Redis that does not know the script yet), and
// returns the slots granted, in order. An error marks the store down.
// Holds are absolute, so a retry after a broken connection cannot count
// twice.
func (r *Redis) hold(ctx context.Context, node string, nowMS int64, ops []holdOp) ([]int64, error) {
	c := r.connected()
	if c == nil {
		return nil, errStoreDown
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	now, ttl := strconv.FormatInt(nowMS, 10), strconv.FormatInt(holdTTL.Milliseconds(), 10)
	args := func(op holdOp) []string {
		return []string{strconv.FormatInt(op.limit, 10), now, node,
			strconv.FormatInt(op.floor, 10), strconv.FormatInt(op.target, 10), ttl}
	}
	cmds := make(rueidis.Commands, len(ops))
	for i, op := range ops {
		cmds[i] = c.B().Evalsha().Sha1(holdSHA).Numkeys(1).Key(op.key).Arg(args(op)...).Build()
	}
	grants := make([]int64, len(ops))
	err := errors.New("limits: no answer")
	for try := 0; try < 2 && err != nil; try++ {
		err = nil
		r.calls.Add(1)
		for i, res := range c.DoMulti(ctx, cmds...) {
			v, e := res.AsInt64()
			if re, ok := rueidis.IsRedisErr(e); ok && re.IsNoScript() {
				r.calls.Add(1)
				v, e = holdLua.Exec(ctx, c, []string{ops[i].key}, args(ops[i])).AsInt64()
			}
			if e != nil {
				err = e
				break
			}
			grants[i] = v
		}
		if _, redisErr := rueidis.IsRedisErr(err); redisErr || ctx.Err() != nil {
			break
		}
		if err != nil && try == 0 {
			// Commands are used once: build them again for the retry.
			for i, op := range ops {
				cmds[i] = c.B().Evalsha().Sha1(holdSHA).Numkeys(1).Key(op.key).Arg(args(op)...).Build()
			}
		}
	}
	if err != nil {
		r.markDown()
		return nil, err
	}
	return grants, nil
}

// refreshLoop refreshes the holds of the limiters using the store, and
// settles what they owe its budget counters (flushBudgets), every
// holdRefresh while it is up, until ctx ends.
func (r *Redis) refreshLoop(ctx context.Context) {
	t := time.NewTicker(r.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.Up() {
			continue
		}
		r.mu.Lock()
		hs := r.holders
		r.mu.Unlock()
		for _, l := range hs {
			if l.refreshHolds(ctx) != nil || l.flushBudgets(ctx) != nil {
				break // marked down: Run probes
			}
		}
	}
}

// addHolder registers l's holds for refreshing.
func (r *Redis) addHolder(l *Limiter) {
	r.mu.Lock()
	r.holders = append(r.holders, l)
	r.mu.Unlock()
}
