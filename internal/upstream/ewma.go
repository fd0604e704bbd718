package upstream

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// peakEWMA is the time-to-first-byte estimate: the largest sample so far,
// each decayed by e^(−age/tau), with error replies holding it (see the
// package doc). Times are Instants as int64 (nanoseconds since the
// Registry's epoch); methods take invTau, 1/tau in 1/ns.
//
// The stored values (estimate, its logarithm, time of the sample that set
// it) are read without a lock: writers serialize on mu and bump seq to odd
// before and to even after storing them (a seqlock), and readers retry
// until they see the same even seq on both sides.
type peakEWMA struct {
	mu  sync.Mutex    // serializes writers
	seq atomic.Uint64 // odd while a writer is storing
	est atomic.Uint64 // math.Float64bits of the estimate when set, seconds
	ln  atomic.Uint64 // math.Float64bits of ln(est), for logRead
	at  atomic.Int64  // when it was set or last held (creation for a new State)
}

func (e *peakEWMA) init(est float64, at int64) {
	e.est.Store(math.Float64bits(est))
	e.ln.Store(math.Float64bits(math.Log(est)))
	e.at.Store(at)
}

// load returns a consistent (estimate, time) pair.
func (e *peakEWMA) load() (float64, int64) {
	est, _, at := e.snapshot()
	return est, at
}

// snapshot returns a consistent (estimate, ln estimate, time) triple.
func (e *peakEWMA) snapshot() (est, ln float64, at int64) {
	for {
		s := e.seq.Load()
		if s&1 == 0 {
			est, ln, at = math.Float64frombits(e.est.Load()), math.Float64frombits(e.ln.Load()), e.at.Load()
			if e.seq.Load() == s {
				return est, ln, at
			}
		}
		runtime.Gosched() // a writer is between its stores; let it finish
	}
}

// decay returns e^(−elapsed/tau), 1 when elapsed is not positive.
func decay(elapsed int64, invTau float64) float64 {
	if elapsed <= 0 {
		return 1
	}
	return math.Exp(-float64(elapsed) * invTau)
}

// read returns the estimate at now, never below floor (seconds).
func (e *peakEWMA) read(now int64, invTau, floor float64) float64 {
	est, at := e.load()
	v := est * decay(now-at, invTau)
	if v < floor { // not the builtin max: its NaN and -0 rules cost on the hot path
		v = floor
	}
	return v
}

// logRead returns ln(read(now, invTau, floor)), lnFloor being ln(floor),
// without an exponential: the logarithm of the decayed estimate is
// ln(est) − elapsed/tau.
func (e *peakEWMA) logRead(now int64, invTau, lnFloor float64) float64 {
	_, ln, at := e.snapshot()
	if elapsed := now - at; elapsed > 0 {
		ln -= float64(elapsed) * invTau
	}
	if ln < lnFloor {
		ln = lnFloor
	}
	return ln
}

// observe records a sample (seconds) taken at now. A sample at or above the
// decayed estimate replaces it; a lower one changes nothing, since the
// decay already brings the estimate down at the rate tau allows.
func (e *peakEWMA) observe(sample float64, now int64, invTau float64) {
	if est, at := e.load(); sample < est*decay(now-at, invTau) {
		return // below the decayed estimate: no write, no lock
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	est, at := math.Float64frombits(e.est.Load()), e.at.Load()
	if sample < est*decay(now-at, invTau) {
		return // another writer raised it meanwhile
	}
	ln := math.Log(sample)
	e.seq.Add(1)
	e.est.Store(math.Float64bits(sample))
	e.ln.Store(math.Float64bits(ln))
	e.at.Store(now)
	e.seq.Add(1)
}

// hold restarts the decay at now from the stored estimate, without
// changing it: after an error reply the estimate reads as it did right
// after its last sample, so a backend that fails fast never looks faster
// for it (docs/failures.md "Fast errors").
func (e *peakEWMA) hold(now int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now <= e.at.Load() {
		return
	}
	e.seq.Add(1)
	e.at.Store(now)
	e.seq.Add(1)
}
