package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// DecodeFunc turns a document into something the node can apply. It
// decodes and validates data completely, without side effects, and
// returns the document's version and a func that compiles it and swaps it
// in, whole or nothing (docs/snapshots.md). The poller calls apply only for a
// version it accepts, so an unchanged or rolled-back document costs no
// compile. An error from either rejects the document; nothing may have
// changed when apply fails.
type DecodeFunc func(data []byte) (version uint64, apply func() error, err error)

// MaxVersionJump is the most a document's version may exceed the highest
// version applied (0 before the first): 2^62. Every numbering a publisher
// plausibly uses fits (a counter, or Unix seconds, milliseconds or
// nanoseconds until 2116, even as the first document), while a single
// publish of math.MaxInt64 (2^63-1) or math.MaxUint64 is refused with
// [ErrVersionJump] instead of raising the persisted floor out of reach.
const MaxVersionJump = 1 << 62

// Defaults for PollerOptions.
const DefaultInterval = 10 * time.Second

// MaxRetry bounds the pause between polls while the node is unready (no
// document loaded, or stale) and polls fail: the pause starts at
// minRetry, doubles with every failure up to MaxRetry (or Interval, if
// that is shorter), and counts from the start of the failed poll, so a
// request abandoned after HTTPOptions.Stall is followed at once. An unready
// node so sees a control plane that answers again within MaxRetry, or
// within one Stall if the request in flight hangs, whatever long_poll and
// poll_interval are (docs/snapshots.md "Recovery").
const MaxRetry = 2 * time.Second

// minRetry is the first pause after a failed poll while unready.
const minRetry = 250 * time.Millisecond

// MinHold is how long a held poll must have taken for an unchanged answer
// to count as held ([LongPoller]) and be followed by the next poll at
// once. A long poll lasts at least a second (?wait= is whole seconds),
// unless the server answers early, for example when it shuts down; then
// the interval applies, as it does against a server that says it held a
// request it did not.
const MinHold = 500 * time.Millisecond

// PollerOptions configure a [Poller].
type PollerOptions struct {
	// Name is the document kind, such as "routes" or "authz": a log
	// field, the prefix of readiness reasons, and the DiskStore kind.
	// Required; 1-32 of [a-z0-9-].
	Name string
	// Source and Decode are required.
	Source Source
	Decode DecodeFunc

	// Interval is the pause between the end of one poll and the start of
	// the next; DefaultInterval when 0. Each pause is drawn uniformly from
	// [Interval-Jitter, Interval+Jitter], so that a fleet restarted
	// together does not poll in lockstep.
	Interval, Jitter time.Duration
	// StaleAfter is how long the poller may go without a successful
	// contact (a 200 or 304, or a successful file read) before it reports
	// itself stale; 0 disables staleness.
	StaleAfter time.Duration

	// Store, when set, persists every applied document and restores it in
	// Restore (docs/snapshots.md "Last good copy").
	Store *DiskStore

	Clock  func() time.Time // default time.Now
	Rand   *rand.Rand       // jitter; default randomly seeded. Used only by Run.
	Logger *slog.Logger     // default: discard
}

// Status is a poller's state for health endpoints and metrics.
type Status struct {
	// Version is the applied document's version; 0 when none is loaded.
	Version uint64
	// LastSuccess is the last successful contact with the source (200 or
	// 304, or a successful file read), whether or not the document was
	// accepted. After a restart it starts as the persisted fetch time.
	LastSuccess time.Time
	// LastError is why the most recent poll failed or its document was
	// rejected; "" after a poll that succeeded.
	LastError string
	// Rejections counts documents not applied (decode, validation,
	// compile, rollback): each document once, however many polls fetch
	// it again. A document is known by its version, or, when it has none
	// to read (it does not decode, or fails its signature check), by its
	// SHA-256.
	Rejections uint64
	// SignatureRejections counts the Rejections that failed the
	// signature check ([ErrSignature]).
	SignatureRejections uint64
	// FetchErrors counts polls that could not fetch (network, status,
	// size, read errors).
	FetchErrors uint64
	// PersistError is why the last attempt to persist failed; "" when it
	// worked or there is no Store.
	PersistError string
	// Stale reports no successful contact for longer than StaleAfter;
	// StaleReason says since when, and the last error.
	Stale       bool
	StaleReason string
}

// Poller keeps one kind of document current: it fetches from a Source,
// applies documents through a DecodeFunc with the version rules of docs/snapshots.md,
// persists them, and tracks staleness. It is the tailscale util/reload
// shape, with the go-control-plane rule that a document is checked whole
// before it is published.
//
// Version rules: a version below the floor (the highest ever applied,
// persisted across restarts) is rejected with [ErrRollback]; one more than
// [MaxVersionJump] above it with [ErrVersionJump]; the version already
// loaded is "no change"; anything higher is applied. Until a
// document is loaded, a version equal to the floor is applied too (a
// restart whose persisted copy no longer validates).
type Poller struct {
	// immutable after NewPoller
	o          PollerOptions
	started    time.Time
	touchEvery time.Duration

	pollMu sync.Mutex // serializes Restore and Poll (held across I/O)

	mu           sync.Mutex // guards the fields below; never held across I/O
	version      uint64     // applied; 0 = none
	floor        uint64     // highest version ever applied, here or persisted
	lastContact  time.Time
	persistedAt  time.Time // fetch time of the persisted copy
	lastErr      string
	rejections   uint64
	sigRejects   uint64
	fetchErrors  uint64
	persistErr   string
	lastLoggedOK bool // the previous poll succeeded (log only transitions)
	again        bool // the next poll may start at once (see Run)
	// contacted: the last poll reached the source (200 or 304, or a file
	// read). Only then may the next one be held ([LongPoller]).
	contacted bool
	failures  int           // consecutive polls that could not fetch
	took      time.Duration // how long the last poll's fetch took
	// rejected names the last document rejected (rejectKey), so that a bad
	// document that stays published is counted and logged once, not at
	// every poll; "" after a document is applied.
	rejected string
}

// NewPoller returns a poller; it does nothing until Restore, Poll or Run.
// It panics if Name, Source or Decode is missing (a programming error).
func NewPoller(o PollerOptions) *Poller {
	if o.Source == nil || o.Decode == nil || checkKind(o.Name) != nil {
		panic("snapshot: NewPoller needs a valid Name, a Source and a Decode func")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	o.Jitter = min(max(o.Jitter, 0), o.Interval)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("snapshot", o.Name)
	// A 304 refreshes the persisted fetch time at most this often: often
	// enough that a restart measures staleness from a recent time, rarely
	// enough that an unchanged document is not rewritten every poll.
	touchEvery := o.StaleAfter / 4
	if touchEvery <= 0 {
		touchEvery = 5 * time.Minute
	}
	return &Poller{o: o, started: o.Clock(), touchEvery: max(touchEvery, o.Interval), lastLoggedOK: true}
}

// Restore applies the document persisted by an earlier run, with the same
// checks as a fetched one, and takes over its floor and fetch time (so
// staleness is measured from when it was last confirmed, docs/snapshots.md "Last good copy"). It
// returns nil when there is no Store or nothing was persisted. Call it
// once, before the first Poll.
func (p *Poller) Restore() error {
	if p.o.Store == nil {
		return nil
	}
	p.pollMu.Lock()
	defer p.pollMu.Unlock()

	data, fetched, floor, ok, err := p.o.Store.Load(p.o.Name)
	p.mu.Lock()
	p.floor = max(p.floor, floor)
	p.mu.Unlock()
	if err != nil {
		p.mu.Lock()
		p.lastErr = "persisted copy: " + err.Error()
		p.mu.Unlock()
		p.o.Logger.Error("persisted snapshot unusable; waiting for the source", "floor", floor, "error", err)
		return err
	}
	if !ok {
		return nil
	}
	if now := p.o.Clock(); fetched.After(now) {
		fetched = now // a clock that went backwards must not extend freshness
	}
	p.mu.Lock()
	if fetched.After(p.lastContact) {
		p.lastContact = fetched
	}
	p.persistedAt = fetched
	p.mu.Unlock()
	return p.apply(data, fetched, false)
}

// Poll fetches once and applies the document if it is new. The error is
// also recorded in Status; a cancelled ctx is returned but not recorded.
func (p *Poller) Poll(ctx context.Context) error {
	p.pollMu.Lock()
	defer p.pollMu.Unlock()

	hold := p.mayHold()
	if lp, ok := p.o.Source.(LongPoller); ok {
		lp.Hold(hold)
	}
	start := p.o.Clock()
	data, changed, err := p.o.Source.Fetch(ctx)
	now := p.o.Clock()
	p.setAgain(false)
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: not the source's fault
		}
		p.mu.Lock()
		p.fetchErrors++
		p.failures++
		p.contacted, p.took = false, now.Sub(start)
		p.mu.Unlock()
		p.fail(ctx, err)
		// A held poll that stalled is asked again at once, without a wait
		// (HTTPOptions.Stall): a control plane that answers again is seen
		// within one stall, whatever the long poll.
		if lp, ok := p.o.Source.(LongPoller); ok && errors.Is(err, ErrStalled) {
			p.setAgain(lp.Held())
		}
		return err
	}
	p.mu.Lock()
	p.lastContact = now
	p.contacted, p.failures, p.took = true, 0, now.Sub(start)
	p.mu.Unlock()
	// A 304 counts as held only if the server really waited: one that
	// claims to hold but answers at once would otherwise be asked again
	// in a tight loop.
	held := false
	if lp, ok := p.o.Source.(LongPoller); ok {
		held = lp.Held() && (changed || now.Sub(start) >= MinHold)
		// A poll that was not allowed to hold is followed at once by one
		// that is: long polling resumes as soon as the source answers.
		held = held || (!hold && p.mayHold())
	}
	if !changed {
		p.succeed()
		p.touch(now)
		p.setAgain(held)
		return nil
	}
	err = p.apply(data, now, true)
	// After a new document, ask again at once: a long-polling server
	// holds the next request until the next change, a static one answers
	// it unchanged. A rejected document waits the interval, so a bad
	// publish is not fetched in a tight loop.
	p.setAgain(err == nil)
	return err
}

// mayHold reports whether the next poll may ask the source to hold it:
// only when a document is loaded and the last poll reached the source.
// A held request that hangs is abandoned only after the wait it asked for
// (HTTPOptions.Stall), so a node with nothing loaded, or whose last poll
// failed (which a stale node's has), asks without a wait and learns within
// one Stall whether the control plane answers. The first poll after a start is never held, so a start
// with a last good copy is not delayed by a long poll either. After a
// contact the node is fresh, and a held poll ends (or is abandoned)
// within long_poll + Stall, which stale_after exceeds.
func (p *Poller) mayHold() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version != 0 && p.contacted
}

// setAgain records whether Run may poll again without a pause.
func (p *Poller) setAgain(v bool) {
	p.mu.Lock()
	p.again = v
	p.mu.Unlock()
}

// pollAgain reports whether the last poll says the next may start at
// once: the server held it (long poll) or it brought a new document, and
// it did not fail.
func (p *Poller) pollAgain() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.again
}

// apply runs the version rules on data and applies it. fetched says
// whether data came from the source (and so is persisted) or from disk.
func (p *Poller) apply(data []byte, at time.Time, fetched bool) error {
	version, apply, err := p.o.Decode(data)
	if err != nil {
		return p.reject(err, fetched, rejectKey(0, data, fetched))
	}
	key := rejectKey(version, data, fetched)
	p.mu.Lock()
	cur, floor := p.version, p.floor
	p.mu.Unlock()
	switch {
	case version == 0:
		// Versions start at 1; a decoder that lets 0 through would make
		// the first document look like "no change".
		return p.reject(errors.New("snapshot: version must be at least 1, got 0"), fetched, key)
	case version < floor:
		return p.reject(fmt.Errorf("%w: got version %d, highest applied %d", ErrRollback, version, floor), fetched, key)
	case version-floor > MaxVersionJump:
		return p.reject(fmt.Errorf("%w: got version %d, more than 2^62 above the highest applied, %d; not applied, so that the floor cannot lock out every later document (docs/snapshots.md)", ErrVersionJump, version, floor), fetched, key)
	case version == cur:
		// docs/snapshots.md: an equal version is simply "no change".
		p.succeed()
		p.setSourceVersion(version)
		p.touch(at)
		return nil
	}
	if err := apply(); err != nil {
		return p.reject(err, fetched, key)
	}
	p.mu.Lock()
	p.version, p.floor = version, max(p.floor, version)
	p.rejected = ""
	p.mu.Unlock()
	p.setSourceVersion(version)
	from := "source"
	if !fetched {
		from = "disk"
	}
	p.o.Logger.Info("snapshot applied", "version", version, "previous", cur, "from", from)
	p.succeed()
	if fetched {
		p.persist(data, version, at)
	}
	return nil
}

// persist saves an applied document. A failure is logged and shown in
// Status; the document stays applied.
func (p *Poller) persist(data []byte, version uint64, at time.Time) {
	if p.o.Store == nil {
		return
	}
	err := p.o.Store.Save(p.o.Name, data, version, at)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.persistErr = err.Error()
		p.o.Logger.Error("cannot persist snapshot; a restart during a control-plane outage would not have it", "version", version, "error", err)
		return
	}
	p.persistErr, p.persistedAt = "", at
}

// touch refreshes the persisted fetch time after a contact that confirmed
// the loaded document, rate-limited by touchEvery.
func (p *Poller) touch(now time.Time) {
	if p.o.Store == nil {
		return
	}
	p.mu.Lock()
	version, due := p.version, p.version != 0 && now.Sub(p.persistedAt) >= p.touchEvery
	if due {
		p.persistedAt = now // also after a failure: retry at the next due time, not every poll
	}
	p.mu.Unlock()
	if !due {
		return
	}
	if err := p.o.Store.Touch(p.o.Name, version, now); err != nil {
		p.o.Logger.Warn("cannot refresh the persisted snapshot's fetch time", "error", err)
	}
}

func (p *Poller) setSourceVersion(v uint64) {
	if vs, ok := p.o.Source.(Versioner); ok {
		vs.SetVersion(v)
	}
}

// rejectKey names a rejected document for counting it once: by its
// version when it has one, else by its SHA-256 (a document that does not
// decode, or whose signature fails, has no version to trust).
func rejectKey(version uint64, data []byte, fetched bool) string {
	from := "source"
	if !fetched {
		from = "disk"
	}
	if version != 0 {
		return from + " version " + strconv.FormatUint(version, 10)
	}
	sum := sha256.Sum256(data)
	return from + " sha256 " + hex.EncodeToString(sum[:])
}

// reject records a document that was not applied and makes the source
// forget it, so that the next poll fetches and judges it again instead of
// calling it unchanged (and Status keeps telling the truth). A document
// rejected by the previous judgement too (the same key) is not counted
// again and is logged at debug level only: a bad publish that stays up is
// one error line and one count, not one per poll.
func (p *Poller) reject(err error, fetched bool, key string) error {
	if !fetched {
		err = fmt.Errorf("persisted copy: %w", err)
	}
	rej := &RejectedError{Err: err}
	if f, ok := p.o.Source.(Forgetter); ok && fetched {
		f.Forget()
	}
	p.mu.Lock()
	repeat := key == p.rejected
	if !repeat {
		p.rejected = key
		p.rejections++
		if errors.Is(err, ErrSignature) {
			p.sigRejects++
		}
	}
	version := p.version
	p.mu.Unlock()
	log := p.o.Logger.Error
	if repeat {
		log = p.o.Logger.Debug
	}
	log("snapshot rejected; the previous one keeps serving", "version", version, "error", rej)
	p.record(rej.Error(), false)
	return rej
}

// fail records a fetch error. Repeats of the same error are logged at
// debug level only, so an outage is one warning, not one per poll.
func (p *Poller) fail(ctx context.Context, err error) {
	msg := err.Error()
	p.mu.Lock()
	repeat := !p.lastLoggedOK && p.lastErr == msg
	p.mu.Unlock()
	level := slog.LevelWarn
	if repeat {
		level = slog.LevelDebug
	}
	p.o.Logger.Log(ctx, level, "snapshot fetch failed; the current one keeps serving", "error", msg)
	p.record(msg, false)
}

func (p *Poller) succeed() {
	p.mu.Lock()
	recovered := !p.lastLoggedOK
	p.mu.Unlock()
	if recovered {
		p.o.Logger.Info("snapshot source reachable again")
	}
	p.record("", true)
}

func (p *Poller) record(lastErr string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr, p.lastLoggedOK = lastErr, ok
}

// Run polls until ctx is done. Between polls it waits one jittered
// interval, except after a poll that the server held (a long poll
// answered 200 or 304, [LongPoller]) or that brought a new document: then
// it polls again at once, so that a long-polling fleet sees each change as
// soon as it is published. Rejected documents wait the interval. Failed
// polls wait the interval while the node is ready, but never past the
// moment it would turn stale; while it is unready they back off from
// 250 ms up to [MaxRetry], so that it is ready again within seconds of
// the control plane answering. Callers Restore and Poll synchronously
// first, so that startup knows what it has; Run continues from that poll. Results go to Status
// and the log. Run returns when ctx is done; it must not be called twice
// at the same time.
func (p *Poller) Run(ctx context.Context) {
	if c, ok := p.o.Source.(interface{ CloseIdleConnections() }); ok {
		defer c.CloseIdleConnections()
	}
	t := time.NewTimer(p.delay())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = p.Poll(ctx) // recorded in Status and logged
		t.Reset(p.delay())
	}
}

// delay is the pause before the next poll: none after a held or fruitful
// poll; the retry backoff after a failure while unready; else nextDelay,
// cut short where the node would turn stale (then the next poll fails or
// refreshes it, and a failure there starts the backoff).
func (p *Poller) delay() time.Duration {
	now := p.o.Clock()
	p.mu.Lock()
	again, failures, took := p.again, p.failures, p.took
	unready := p.version == 0 || p.staleLocked(now)
	untilStale := p.untilStaleLocked(now)
	p.mu.Unlock()
	switch {
	case again:
		return 0
	case failures > 0 && unready:
		return max(p.retryDelay(failures)-took, 0)
	case untilStale > 0:
		return min(p.nextDelay(), untilStale)
	}
	return p.nextDelay()
}

// retryDelay is the pause after the n-th consecutive failure while
// unready, counted from the start of the failed poll: minRetry doubled
// per failure up to MaxRetry (or Interval, if shorter), drawn from the
// upper half of that, so that a fleet that lost its control plane
// together does not come back in step.
func (p *Poller) retryDelay(n int) time.Duration {
	d := min(MaxRetry, p.o.Interval)
	if n < 8 {
		d = min(d, minRetry<<(n-1))
	}
	return d/2 + time.Duration(p.o.Rand.Int64N(int64(d/2)+1))
}

// nextDelay draws the pause before the next poll from
// [Interval-Jitter, Interval+Jitter].
func (p *Poller) nextDelay() time.Duration {
	if p.o.Jitter <= 0 {
		return p.o.Interval
	}
	return p.o.Interval - p.o.Jitter + time.Duration(p.o.Rand.Int64N(2*int64(p.o.Jitter)+1))
}

// staleLocked reports whether the poller is stale at now. p.mu is held.
func (p *Poller) staleLocked(now time.Time) bool {
	return p.o.StaleAfter > 0 && now.Sub(p.staleSinceLocked()) > p.o.StaleAfter
}

// untilStaleLocked is how long until staleLocked turns true; 0 when it
// already is or staleness is off. p.mu is held.
func (p *Poller) untilStaleLocked(now time.Time) time.Duration {
	if p.o.StaleAfter <= 0 {
		return 0
	}
	return max(p.staleSinceLocked().Add(p.o.StaleAfter+1).Sub(now), 0)
}

// staleSinceLocked is when staleness is measured from: the last contact,
// or the start. p.mu is held.
func (p *Poller) staleSinceLocked() time.Time {
	if p.lastContact.IsZero() {
		return p.started
	}
	return p.lastContact
}

// Status returns the current state, with staleness evaluated now.
func (p *Poller) Status() Status {
	now := p.o.Clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{
		Version:      p.version,
		LastSuccess:  p.lastContact,
		LastError:    p.lastErr,
		Rejections:   p.rejections,
		FetchErrors:  p.fetchErrors,
		PersistError: p.persistErr,

		SignatureRejections: p.sigRejects,
	}
	if p.o.StaleAfter <= 0 {
		return s
	}
	since, never := p.staleSinceLocked(), p.lastContact.IsZero()
	if age := now.Sub(since); age > p.o.StaleAfter {
		s.Stale = true
		format := "no successful contact with %s for %s (stale_after %s)"
		if never {
			format = "no successful contact with %s since start, %s ago (stale_after %s)"
		}
		s.StaleReason = fmt.Sprintf(format, sourceName(p.o.Source), age.Round(time.Second), p.o.StaleAfter)
		if p.lastErr != "" {
			s.StaleReason += "; last error: " + p.lastErr
		}
	}
	return s
}

// Ready reports whether this kind of document is ready: nil, or an error
// wrapping [ErrNotLoaded] or [ErrStale] whose text is the reason for
// /readyz (docs/operations.md). It fits the app's readiness checks.
func (p *Poller) Ready() error {
	s := p.Status()
	switch {
	case s.Version == 0 && s.LastError != "":
		return fmt.Errorf("%s: %w; last error: %s", p.o.Name, ErrNotLoaded, s.LastError)
	case s.Version == 0:
		return fmt.Errorf("%s: %w", p.o.Name, ErrNotLoaded)
	case s.Stale:
		return fmt.Errorf("%s: %w: %s", p.o.Name, ErrStale, s.StaleReason)
	}
	return nil
}

// sourceName names a source for messages: its String if it has one (the
// sources here redact credentials), else its type.
func sourceName(s Source) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
}
