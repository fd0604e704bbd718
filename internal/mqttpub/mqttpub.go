package mqttpub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Record is one outbox row. Its Payload is published as is, and kept by
// the Publisher until the row's PUBACK.
type Record = outbox.Record

// Source is the outbox as the Publisher consumes it; *outbox.Store is one.
type Source interface {
	// Read returns up to max committed rows with Seq > after, in Seq
	// order. Fewer than max rows means there are no more after them now:
	// the Publisher then waits for Notify rather than reading again.
	Read(after uint64, max int) ([]Record, error)
	// Delete removes rows; unknown sequence numbers are not an error.
	Delete(seqs ...uint64) error
	// Notify is signalled after commits that added rows.
	Notify() <-chan struct{}
}

var _ Source = (*outbox.Store)(nil)

// Defaults for zero Options fields.
const (
	DefaultTopic          = "scootgate/usage"
	DefaultWindow         = 1024
	DefaultMaxPayload     = 256 << 10
	DefaultKeepAlive      = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultAckTimeout     = 30 * time.Second
	DefaultBackoffMin     = 500 * time.Millisecond
	// DefaultBackoffMax caps the reconnect wait so that delivery resumes
	// within about 2 s of a broker coming back, however long it was away
	// (a 30 s cap once kept a node away 11 s after the broker returned).
	// Full jitter spreads a fleet over those 2 s; a node retrying a dead
	// broker every 0–2 s costs a refused TCP connection each time.
	DefaultBackoffMax = 2 * time.Second
	// DefaultBatchMax is one event per message, the framing every
	// consumer reads.
	DefaultBatchMax = 1
)

// CommitBatch is how many queued events should start an outbox commit
// (outbox.Options.MaxBatch) for a publisher that sends up to batchMax
// events a message, on an outbox whose crash window holds maxUnsynced
// events. Each commit wakes the publisher for one burst of publishes and
// PUBACKs, on the CPU that serves requests; one event a message, 64
// events (the outbox's default) kept that burst from lengthening the
// requests it delays. Batched, the burst is batchMax times fewer
// messages, so a commit may hold that many times more: at high rates
// fsyncs then follow the commit interval, not the event rate (at 2,000
// events/s, 10 a second instead of 31). Either way a commit starts before
// a quarter of the crash window waits (1,024 of the default 4,096), well
// before new events would be refused.
func CommitBatch(batchMax, maxUnsynced int) int {
	return max(1, min(outbox.DefaultMaxBatch*max(1, batchMax), maxUnsynced/4))
}

// maxReadRows bounds the rows one outbox Read returns (rounded to whole
// batches), so that a read copies about 400 KiB of typical events whatever
// the window and the framing: a window of 1,024 batches of 100 once read
// 102,400 rows, 40 MB, at once, and the collections that followed cost a
// backlog drain half its CPU (BenchmarkDrainMosquitto).
const maxReadRows = 1024

// Limits checked by New.
const (
	// MaxWindow is the number of MQTT packet identifiers.
	MaxWindow = 65535
	// MaxMaxPayload keeps a PUBLISH below MQTT's largest packet (a
	// remaining length of 268,435,455 bytes) with room for the topic.
	MaxMaxPayload = 255 << 20
	// MaxBatchMax bounds the events of one batched message: beyond a few
	// hundred the broker's cost per event no longer falls, and a message
	// is what a consumer must handle whole.
	MaxBatchMax = 1000
)

// maxKeepAlive is the longest keepalive CONNECT can carry: a 16-bit
// number of seconds.
const maxKeepAlive = 65535 * time.Second

// idlePoll re-reads the outbox when nothing else happened for this long, so
// that a lost wakeup costs seconds of delay rather than waiting for the next
// append.
const idlePoll = 5 * time.Second

// Options configure a Publisher. Zero values take the defaults above.
type Options struct {
	// Broker is tcp://host:port or ssl://host:port, without user info.
	Broker string
	// ClientID is the MQTT client id; derive it with ClientID(node id):
	// two nodes sharing one id kick each other off the broker.
	ClientID string
	// Topic is the topic events are published to (no wildcards).
	Topic string
	// Username and Password authenticate to the broker; a password needs a
	// username (MQTT 3.1.1 §3.1.2.9).
	Username string
	Password secret.Secret
	// TLS is used for ssl:// brokers (nil: system roots, TLS 1.2+); it must
	// be nil for tcp://. ServerName defaults to the broker host.
	TLS *tls.Config
	// Window is the most publishes in flight (sent, PUBACK not yet seen).
	Window int
	// MaxPayload is the largest payload published. Larger rows are deleted
	// unpublished and counted in Stats.Oversize: a broker may acknowledge
	// and then drop a message above its own limit (mosquitto
	// message_size_limit), so keep this below the broker's limit.
	MaxPayload int
	// BatchMax is the most events in one message. 1 (the default) sends
	// each event as its own message to Topic. Above 1, the events read
	// together go out as newline-delimited batches to Topic +
	// usageevent.BatchTopicSuffix (consumers read them with
	// usageevent.DecodeBatch), each at most MaxPayload bytes; a batch's rows are
	// deleted together on its PUBACK.
	BatchMax int
	// KeepAlive is the MQTT keepalive; a dead link is noticed within about
	// 1.5 times it.
	KeepAlive time.Duration
	// ConnectTimeout bounds dial + TLS + CONNECT/CONNACK, and the writes
	// of each burst of publishes.
	ConnectTimeout time.Duration
	// AckTimeout: with publishes in flight and no PUBACK for this long, the
	// connection is dropped and the rows are replayed on a new one.
	AckTimeout time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff (full jitter).
	BackoffMin, BackoffMax time.Duration
	// Rand returns a uniform float in [0, 1) for the jitter (default
	// math/rand/v2.Float64).
	Rand func() float64
	// Clock is the time source (default time.Now).
	Clock func() time.Time
	// Logger receives connection events (default: discard). The password
	// is never logged.
	Logger *slog.Logger
}

// ClientID derives the MQTT client id from a node id.
func ClientID(nodeID string) string { return "scootgate-" + nodeID }

// Stats is a snapshot of the Publisher's counters (docs/usage-events.md delivery
// metrics). Counters only grow; they are per Publisher, not per process.
type Stats struct {
	Connected       bool   // a connection is up now
	Published       uint64 // PUBLISH packets written, replays included
	Acked           uint64 // rows deleted after a PUBACK on the connection that carried them
	Reconnects      uint64 // connections established after the first one
	ConnectFailures uint64 // connection attempts that failed
	Oversize        uint64 // rows larger than MaxPayload, deleted unpublished
	InFlight        int    // publishes awaiting their PUBACK now
	LastError       string // the most recent connection or outbox error; "" if none
}

// Publisher drains a Source to an MQTT broker. Create it with New and call
// Run once.
type Publisher struct {
	// immutable after New
	src     Source
	o       Options
	log     *slog.Logger
	connect connector
	wait    func(ctx context.Context, d time.Duration) bool // the backoff sleep; tests record it

	running atomic.Bool

	// counters for Stats
	connected       atomic.Bool
	published       atomic.Uint64
	acked           atomic.Uint64
	reconnects      atomic.Uint64
	connectFailures atomic.Uint64
	oversize        atomic.Uint64
	inFlight        atomic.Int64

	mu      sync.Mutex
	lastErr string // guarded by mu

	// used by the Run goroutine only, reused across connections
	win  *window  // the publishes in flight on the current connection
	ids  []uint16 // packet identifiers of the PUBACKs being settled
	acks []uint64 // the sequence numbers settle deletes
	b    batch    // the batch being built (BatchMax > 1)
}

// New checks o, applies defaults and returns a Publisher for src. It does
// not connect.
func New(src Source, o Options) (*Publisher, error) {
	if src == nil {
		return nil, errors.New("mqttpub: nil source")
	}
	setDefaults(&o)
	lc, err := check(&o)
	if err != nil {
		return nil, err
	}
	p := &Publisher{src: src, o: o, log: o.Logger, wait: sleep}
	p.connect = func(ctx context.Context) (link, error) {
		l, err := dialLink(ctx, lc)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return p, nil
}

func setDefaults(o *Options) {
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.BatchMax == 0 {
		o.BatchMax = DefaultBatchMax
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffMin)
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// check validates o (defaults applied) and resolves what dialLink needs.
// Messages never contain the password.
func check(o *Options) (*linkConfig, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mqttpub: "+format, args...)) }

	u, err := url.Parse(o.Broker)
	switch {
	case o.Broker == "":
		bad("broker is required")
	case err != nil:
		bad("broker is not a URL")
	case u.Scheme != "tcp" && u.Scheme != "ssl":
		bad("broker: expected tcp://host:port or ssl://host:port")
	case u.User != nil:
		bad("broker must not contain credentials; set Username and Password")
	case u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		bad("broker: expected %s://host:port", u.Scheme)
	}
	if o.ClientID == "" || len(o.ClientID) > 65535 || !utf8.ValidString(o.ClientID) {
		bad("client id must be 1-65535 bytes of UTF-8")
	}
	if len(o.Topic) > 65535 || !utf8.ValidString(o.Topic) || strings.ContainsAny(o.Topic, "+#\x00") {
		bad("topic must be UTF-8 without wildcards or NUL, at most 65535 bytes")
	}
	if !o.Password.IsZero() && o.Username == "" {
		bad("a password needs a username")
	}
	// CONNECT carries both with a 2-byte length (MQTT 3.1.1 §3.1.3.4-5);
	// paho would cut a longer value to 65535 bytes without a word, and the
	// broker would refuse credentials nobody configured.
	if len(o.Username) > 65535 || !utf8.ValidString(o.Username) {
		bad("username must be at most 65535 bytes of UTF-8")
	}
	if len(o.Password.Reveal()) > 65535 {
		bad("password is longer than 65535 bytes")
	}
	if o.Window < 1 || o.Window > MaxWindow {
		bad("window %d out of range 1..%d", o.Window, MaxWindow)
	}
	if o.BatchMax < 1 || o.BatchMax > MaxBatchMax {
		bad("batch max %d out of range 1..%d", o.BatchMax, MaxBatchMax)
	}
	if o.BatchMax > 1 && len(o.Topic)+len(usageevent.BatchTopicSuffix) > 65535 {
		bad("topic is too long for its batch suffix")
	}
	if o.MaxPayload < 1 || o.MaxPayload > MaxMaxPayload {
		bad("max payload %d out of range 1..%d", o.MaxPayload, MaxMaxPayload)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		lo   time.Duration
	}{
		{"keepalive", o.KeepAlive, time.Second}, // MQTT keepalive is whole seconds
		{"connect timeout", o.ConnectTimeout, time.Millisecond},
		{"ack timeout", o.AckTimeout, time.Millisecond},
		{"backoff min", o.BackoffMin, time.Millisecond},
		{"backoff max", o.BackoffMax, time.Millisecond},
	} {
		if d.v < d.lo {
			bad("%s %s is below %s", d.name, d.v, d.lo)
		}
	}
	if o.BackoffMax < o.BackoffMin {
		bad("backoff max %s is below backoff min %s", o.BackoffMax, o.BackoffMin)
	}
	if o.KeepAlive > maxKeepAlive {
		bad("keepalive %s is above %s (MQTT's 16-bit seconds)", o.KeepAlive, maxKeepAlive)
	}
	if o.BackoffMax > time.Hour {
		bad("backoff max %s is above 1h", o.BackoffMax)
	}
	var tc *tls.Config
	if err == nil && u != nil {
		switch {
		case u.Scheme == "tcp" && o.TLS != nil:
			bad("TLS configured for a tcp:// broker; use ssl://")
		case u.Scheme == "ssl" && o.TLS == nil:
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		case u.Scheme == "ssl":
			tc = o.TLS.Clone()
		}
		if tc != nil && tc.ServerName == "" {
			tc.ServerName = u.Hostname()
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	topic := o.Topic
	if o.BatchMax > 1 {
		topic += usageevent.BatchTopicSuffix
	}
	return &linkConfig{
		broker:         &url.URL{Scheme: u.Scheme, Host: u.Host},
		clientID:       o.ClientID,
		topic:          topic,
		username:       o.Username,
		password:       o.Password.Reveal(),
		tls:            tc,
		keepAlive:      o.KeepAlive,
		connectTimeout: o.ConnectTimeout,
	}, nil
}

// Stats returns the current counters. Safe for concurrent use.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	lastErr := p.lastErr
	p.mu.Unlock()
	return Stats{
		Connected:       p.connected.Load(),
		Published:       p.published.Load(),
		Acked:           p.acked.Load(),
		Reconnects:      p.reconnects.Load(),
		ConnectFailures: p.connectFailures.Load(),
		Oversize:        p.oversize.Load(),
		InFlight:        int(p.inFlight.Load()),
		LastError:       lastErr,
	}
}

func (p *Publisher) setErr(err error) {
	p.mu.Lock()
	p.lastErr = err.Error()
	p.mu.Unlock()
}

// Run connects, drains the Source and reconnects after every failure,
// until ctx ends; then it disconnects and returns nil. It returns
// ErrRunning if the Publisher is already running.
func (p *Publisher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer p.running.Store(false)

	failures := 0 // consecutive failed or short-lived connections
	connects := 0
	for {
		if failures > 0 {
			d := backoff(failures, p.o.BackoffMin, p.o.BackoffMax, p.o.Rand())
			if !p.wait(ctx, d) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		l, err := p.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.connectFailures.Add(1)
			p.setErr(err)
			failures++
			p.log.Warn("mqtt connect failed", "broker", p.o.Broker, "client_id", p.o.ClientID, "error", err, "attempt", failures)
			continue
		}
		if connects > 0 {
			p.reconnects.Add(1)
		}
		connects++
		p.log.Info("mqtt connected", "broker", p.o.Broker, "client_id", p.o.ClientID)

		p.connected.Store(true)
		start := p.o.Clock()
		progressed, err := p.drain(ctx, l)
		p.connected.Store(false)
		p.inFlight.Store(0)
		l.close()
		if ctx.Err() != nil {
			p.log.Info("mqtt disconnected", "broker", p.o.Broker)
			return nil
		}
		if err != nil {
			p.setErr(err)
		}
		// A connection that delivered something, or lived through a whole
		// backoff ceiling, resets the backoff; one the broker drops at once
		// (a duplicate client id, an overloaded broker) does not.
		if progressed || p.o.Clock().Sub(start) >= p.o.BackoffMax {
			failures = 0
		}
		failures++
		p.log.Warn("mqtt connection ended; replaying unacknowledged rows on the next one", "broker", p.o.Broker, "error", err)
	}
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
