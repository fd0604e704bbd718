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

// holdRefresh is how often a node looks over the concurrency slots it
// holds in Redis: it returns those it no longer uses, and renews the
// holds that are due (holdRenew).
const holdRefresh = time.Second

// holdRenew is how long a hold that did not change goes without being
// set again. A refresh sends only the holds that shrank, that an outage
// made stale, or that are due: at a key's limit every node's hold stays
// the same, and re-sending each of them every second cost each node a
// round trip a second, whatever it served (0.4 of the 0.48 round trips
// per offered request of two nodes at a max_concurrent of 10,
// BenchmarkAtLimit). Any take sets the hold too, and counts as a renewal.
const holdRenew = 6 * time.Second

// maxHoldRetake bounds how long a node found full leaves the fleet's
// max_concurrent alone. At a key's limit with more demand than slots,
// every node reuses the slots its own requests release, so the fleet
// stays full and a take finds nothing. Shorter than holdRenew, so that
// a refused node's take comes before its renewal and renews the hold:
// a node held at the limit then costs one round trip per maxHoldRetake
// (BenchmarkAtLimit). The price is that slots another node stopped
// using, and returned with its refresh, may wait up to this long for a
// node that was refused. A crashed node's slots take holdTTL to come
// back anyway.
const maxHoldRetake = 5 * time.Second

// holdTTL is how long a node's hold outlives the last time it was set:
// the slots of a node that crashed free after this. A hold is renewed
// every holdRenew, looked at every holdRefresh; the rest, 4 s, is slack
// for a renewal that times out (1 s), the reconnection after it and a
// long GC pause before a live node's hold lapses, as when every hold was
// set each second with a TTL of 5 s. A crash costs the fleet the crashed
// node's slots for at most this long (docs/limits.md).
const holdTTL = holdRenew + holdRefresh + 4*time.Second

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
	setAt     int64         // when Redis last set the hold (its expiry is holdTTL on); renewed holdRenew on
	over      bool          // Redis recorded more than fits beside the other nodes' holds (slots in use after an outage)
	sending   int64         // the target of the take or refresh in flight
	fetching  chan struct{} // non-nil while a take or refresh is in flight; closed when it ends
}

// usable is how many slots an admission may fill without asking Redis.
// While a take or refresh is in flight, no more than it asks for: the
// answer may shrink the hold to that, never below (beginHoldLocked). A
// hold recorded beyond what fits (over) has no slot to spare: the fleet
// is over its limit, and a slot its node frees is not used again until
// Redis grants it anew.
func (h *hold) usable(gen uint64) int64 {
	if h.gen != gen || h.over {
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
func (s *state) endHoldLocked(op holdOp, gen uint64, grant, room int64, err error, take bool, at int64) {
	if err == nil {
		s.hold.held, s.hold.gen, s.hold.setAt, s.hold.over = grant, gen, at, grant > room
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
	var g holdGrant
	if err == nil {
		g = grants[0]
	}
	s.mu.Lock()
	s.endHoldLocked(op, gen, g.slots, g.room, err, true, l.since(now))
	s.mu.Unlock()
	return false, err
}

// refreshHolds sets again, in one round trip, the hold of every bound
// key and tenant with a fleet-wide max_concurrent whose hold changed or
// is due: the hold becomes what the node used at most since the last
// refresh (so a released slot goes back to the fleet within two
// refreshes); a hold of a generation before the store's last outage is
// set again to the requests in flight, those admitted during the outage
// included; and a hold that stayed the same is renewed holdRenew after it
// was last set, pushing its expiry holdTTL on. Holds that need none of
// this cost nothing.
func (l *Limiter) refreshHolds(ctx context.Context) error {
	states := l.concStates.Load()
	if states == nil || len(*states) == 0 {
		return nil
	}
	gen := l.fleet.gen.Load()
	now := l.clock()
	at := l.since(now)
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
		if s.hold.gen == gen && !s.hold.over && target == s.hold.held && at-s.hold.setAt < int64(holdRenew) {
			s.mu.Unlock() // unchanged, and not due
			continue
		}
		op, _ := s.beginHoldLocked(gen, target, true)
		s.mu.Unlock()
		ss = append(ss, s)
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil
	}
	grants, err := l.fleet.hold(ctx, l.node, now.UnixMilli(), ops)
	for i, s := range ss {
		var g holdGrant
		if err == nil {
			g = grants[i]
		}
		s.mu.Lock()
		s.endHoldLocked(ops[i], gen, g.slots, g.room, err, false, at)
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
// Returns {slots granted, the limit less the other nodes' holds}: a grant
// above the second is recorded beyond the limit.
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
return {grant, limit - others}
`

// holdSHA is holdScript's SHA-1, for EVALSHA.
var holdSHA = func() string {
	sum := sha1.Sum([]byte(holdScript))
	return hex.EncodeToString(sum[:])
}()

var holdLua = rueidis.NewLuaScript(holdScript)

// holdGrant is holdScript's answer to one op.
type holdGrant struct {
	slots int64 // granted
	room  int64 // the limit less the other nodes' holds
}

// hold runs holdScript once per op, in one round trip (a pipeline of
// EVALSHA; EVAL once for a Redis that does not know the script yet), and
// returns the answers, in order. An error marks the store down.
// Holds are absolute, so a retry after a broken connection cannot count
// twice.
func (r *Redis) hold(ctx context.Context, node string, nowMS int64, ops []holdOp) ([]holdGrant, error) {
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
	grants := make([]holdGrant, len(ops))
	err := errors.New("limits: no answer")
	for try := 0; try < 2 && err != nil; try++ {
		err = nil
		r.calls.Add(1)
		for i, res := range c.DoMulti(ctx, cmds...) {
			v, e := res.AsIntSlice()
			if re, ok := rueidis.IsRedisErr(e); ok && re.IsNoScript() {
				r.calls.Add(1)
				v, e = holdLua.Exec(ctx, c, []string{ops[i].key}, args(ops[i])).AsIntSlice()
			}
			if e == nil && len(v) != 2 {
				e = errors.New("limits: unexpected hold script reply")
			}
			if e != nil {
				err = e
				break
			}
			grants[i] = holdGrant{slots: v[0], room: v[1]}
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
