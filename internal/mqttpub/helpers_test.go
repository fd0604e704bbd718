package mqttpub

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/scootgate/scootgate/internal/devstack/broker"
	"github.com/scootgate/scootgate/internal/secret"
)

// waitLimit bounds every eventually; generous because -race on 2 cores is
// slow, and only reached when a test fails.
const waitLimit = 15 * time.Second

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitLimit, what)
		}
		<-tick.C
	}
}

// ---------------------------------------------------------------------------
// fakeSource: an in-memory outbox.

// fakeSource is an in-memory Source. It records every Delete and lets a
// test check each one (onDelete runs under the lock, before the rows go).
type fakeSource struct {
	mu       sync.Mutex
	rows     []Record // ascending Seq; deleted rows are removed lazily
	gone     map[uint64]bool
	head     int // rows[:head] are all deleted
	next     uint64
	notify   chan struct{}
	deletes  [][]uint64          // every Delete call, in order
	onDelete func(seqs []uint64) // optional invariant check
	readErr  error               // returned once by the next Read
	reads    int
	maxAsked int // the largest max any Read asked for
}

func newFakeSource() *fakeSource {
	return &fakeSource{gone: map[uint64]bool{}, notify: make(chan struct{}, 1)}
}

// add appends rows and signals Notify, like a commit.
func (s *fakeSource) add(payloads ...[]byte) []uint64 {
	s.mu.Lock()
	var seqs []uint64
	for _, p := range payloads {
		s.next++
		s.rows = append(s.rows, Record{Seq: s.next, Appended: time.Unix(int64(s.next), 0), Payload: p})
		seqs = append(seqs, s.next)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return seqs
}

func (s *fakeSource) Read(after uint64, max int) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if max > s.maxAsked {
		s.maxAsked = max
	}
	if err := s.readErr; err != nil {
		s.readErr = nil
		return nil, err
	}
	live := s.rows[s.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].Seq > after })
	var out []Record
	for _, r := range live[i:] {
		if len(out) == max {
			break
		}
		if !s.gone[r.Seq] {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *fakeSource) Delete(seqs ...uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onDelete != nil {
		s.onDelete(seqs)
	}
	s.deletes = append(s.deletes, slices.Clone(seqs))
	for _, q := range seqs {
		s.gone[q] = true
	}
	for s.head < len(s.rows) && s.gone[s.rows[s.head].Seq] {
		delete(s.gone, s.rows[s.head].Seq)
		s.head++
	}
	return nil
}

func (s *fakeSource) Notify() <-chan struct{} { return s.notify }

// pending returns the number of rows not deleted.
func (s *fakeSource) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows) - s.head - len(s.gone)
}

func (s *fakeSource) deleteCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deletes)
}

// payloads returns n distinct event-like payloads of about size bytes.
func payloads(prefix string, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		p := fmt.Appendf(nil, `{"event_id":"%s-%06d","schema":2,"authoritative":false,"pad":"`, prefix, i)
		p = append(p, bytes.Repeat([]byte{'x'}, max(0, size-len(p)-2))...)
		out[i] = append(p, `"}`...)
	}
	return out
}

// ---------------------------------------------------------------------------
// relay: a loopback TCP forwarder a test can take down, bring up and cut.

// relay forwards connections from its own port to target. It starts down
// (nothing listens on its port: connections are refused).
type relay struct {
	t      testing.TB
	target string
	addr   string // fixed port

	mu     sync.Mutex
	ln     net.Listener   // nil while down; guarded by mu
	conns  []net.Conn     // open client and target connections; guarded by mu
	frozen []*atomic.Bool // one per relayed connection; guarded by mu
	wg     sync.WaitGroup
}

func newRelay(t testing.TB, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{t: t, target: target, addr: ln.Addr().String()}
	_ = ln.Close() // start down; up() listens on the same port again
	t.Cleanup(func() { r.down(); r.wg.Wait() })
	return r
}

func (r *relay) up() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("relay: listen again on %s: %v", r.addr, err)
	}
	r.ln = ln
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.serve(c)
		}
	})
}

func (r *relay) serve(c net.Conn) {
	u, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = c.Close()
		return
	}
	frozen := new(atomic.Bool)
	r.mu.Lock()
	r.conns = append(r.conns, c, u)
	r.frozen = append(r.frozen, frozen)
	r.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if frozen.Load() {
			return // stay half-open: the far side's close is not passed on
		}
		_ = dst.Close()
		_ = src.Close()
	}
	r.wg.Go(func() { pipe(u, c) })
	r.wg.Go(func() { pipe(c, u) })
}

// freeze makes every current connection half-open: bytes are read and
// dropped in both directions, nothing is closed. New connections work.
func (r *relay) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.frozen {
		f.Store(true)
	}
}

// cut closes every relayed connection (both sides) and keeps listening.
func (r *relay) cut() {
	r.mu.Lock()
	conns := r.conns
	r.conns, r.frozen = nil, nil
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// down stops listening and cuts every connection.
func (r *relay) down() {
	r.mu.Lock()
	if r.ln != nil {
		_ = r.ln.Close()
		r.ln = nil
	}
	r.mu.Unlock()
	r.cut()
}

// ---------------------------------------------------------------------------
// mochi: the embedded broker and a hook that withholds and counts PUBACKs.

// ackHook is a mochi hook that can withhold PUBACKs (by rejecting the
// PUBLISH, which mochi then neither acknowledges nor delivers) and records
// every PUBACK the broker encodes, by payload, before it is written: a
// PUBACK the publisher reads has always been recorded first.
type ackHook struct {
	mqtt.HookBase
	withhold atomic.Bool
	// withholdIf, when set before the first publish, withholds the
	// PUBACK of each payload it returns true for.
	withholdIf func(payload []byte) bool
	username   string // when set, CONNECT must carry these credentials
	password   string

	mu        sync.Mutex
	conn      map[*mqtt.Client]int               // connection number (1-based) of each client; guarded by mu
	conns     int                                // connections established; guarded by mu
	live      map[*mqtt.Client]bool              // guarded by mu
	inflight  map[*mqtt.Client]map[uint16][]byte // accepted publishes awaiting their PUBACK; guarded by mu
	received  map[int]int                        // PUBLISH packets per connection; guarded by mu
	rejected  map[int]int                        // withheld (never acknowledged) per connection; guarded by mu
	maxUnack  int                                // most publishes without PUBACK on one connection; guarded by mu
	unacked   map[*mqtt.Client]int               // guarded by mu
	acks      map[string][]int                   // payload → connections on which a PUBACK for it was issued; guarded by mu
	seen      map[int][]string                   // payloads received per connection, in order; guarded by mu
	clean     int                                // connections that ended with DISCONNECT; guarded by mu
	authFails int                                // guarded by mu
}

func newAckHook() *ackHook {
	return &ackHook{
		conn:     map[*mqtt.Client]int{},
		live:     map[*mqtt.Client]bool{},
		inflight: map[*mqtt.Client]map[uint16][]byte{},
		received: map[int]int{},
		rejected: map[int]int{},
		unacked:  map[*mqtt.Client]int{},
		acks:     map[string][]int{},
		seen:     map[int][]string{},
	}
}

func (h *ackHook) ID() string { return "scootgate-test-acks" }

func (h *ackHook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnSessionEstablished, mqtt.OnDisconnect,
		mqtt.OnPublish, mqtt.OnPacketEncode,
	}, []byte{b})
}

func (h *ackHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	if h.username == "" {
		return true
	}
	ok := string(pk.Connect.Username) == h.username && string(pk.Connect.Password) == h.password
	if !ok {
		h.mu.Lock()
		h.authFails++
		h.mu.Unlock()
	}
	return ok
}

func (h *ackHook) OnACLCheck(*mqtt.Client, string, bool) bool { return true }

func (h *ackHook) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	if !strings.HasPrefix(cl.ID, "scootgate-") {
		return // the test subscriber
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conns++
	h.conn[cl] = h.conns
	h.live[cl] = true
	h.inflight[cl] = map[uint16][]byte{}
}

func (h *ackHook) OnDisconnect(cl *mqtt.Client, err error, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn[cl] == 0 {
		return // the test subscriber
	}
	delete(h.live, cl)
	if err == nil {
		h.clean++
	}
}

func (h *ackHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.conn[cl]
	if n == 0 || pk.FixedHeader.Qos == 0 {
		return pk, nil // the test subscriber's own traffic, if any
	}
	h.received[n]++
	h.seen[n] = append(h.seen[n], string(pk.Payload))
	h.unacked[cl]++
	h.maxUnack = max(h.maxUnack, h.unacked[cl])
	if h.withhold.Load() || (h.withholdIf != nil && h.withholdIf(pk.Payload)) {
		h.rejected[n]++
		return pk, packets.ErrRejectPacket // no PUBACK, no delivery
	}
	h.inflight[cl][pk.PacketID] = slices.Clone(pk.Payload)
	return pk, nil
}

func (h *ackHook) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Puback {
		return pk
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.inflight[cl][pk.PacketID]
	if !ok {
		return pk
	}
	delete(h.inflight[cl], pk.PacketID)
	h.unacked[cl]--
	h.acks[string(p)] = append(h.acks[string(p)], h.conn[cl])
	return pk
}

// cut closes every live client connection from the broker side.
func (h *ackHook) cut() {
	h.mu.Lock()
	var cls []*mqtt.Client
	for cl := range h.live {
		if h.conn[cl] > 0 {
			cls = append(cls, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range cls {
		cl.Stop(errors.New("cut by test"))
	}
}

func (h *ackHook) read(f func(h *ackHook)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

// ackedOn returns the connections on which payload p was acknowledged.
func (h *ackHook) ackedOn(p []byte) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.acks[string(p)])
}

// startMochi starts an embedded broker on addr ("127.0.0.1:0" for any
// port) with hook, and returns its address. It is closed at cleanup.
func startMochi(t testing.TB, addr string, hook *ackHook) (string, *mqtt.Server) {
	return startMochiWith(t, addr, hook, nil)
}

// startMochiWith is startMochi with TLS when tc is not nil.
func startMochiWith(t testing.TB, addr string, hook mqtt.Hook, tc *tls.Config) (string, *mqtt.Server) {
	t.Helper()
	s := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := s.AddHook(hook, nil); err != nil {
		t.Fatal(err)
	}
	l := &broker.Listener{Addr: addr, TLS: tc} // mochi v2.7.9 Close workarounds: see internal/devstack/broker
	if err := s.AddListener(l); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return l.Address(), s
}

// ---------------------------------------------------------------------------
// brokers under test.

// testBroker is a broker the suite runs against. hook is nil for
// Mosquitto (tests that withhold acknowledgements need mochi).
type testBroker struct {
	name string
	addr string
	hook *ackHook
}

// brokers returns the embedded mochi broker and, when
// SCOOTGATE_MOSQUITTO_ADDR is set, the real Mosquitto (scripts/ci-mosquitto.sh).
// Without it the Mosquitto subtests skip loudly, or fail when
// SCOOTGATE_REQUIRE_DAEMONS=1.
func brokers(t *testing.T) []func(t *testing.T) testBroker {
	return []func(t *testing.T) testBroker{
		func(t *testing.T) testBroker {
			h := newAckHook()
			addr, _ := startMochi(t, "127.0.0.1:0", h)
			return testBroker{name: "mochi", addr: addr, hook: h}
		},
		func(t *testing.T) testBroker {
			addr := os.Getenv("SCOOTGATE_MOSQUITTO_ADDR")
			if addr == "" {
				if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
					t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but SCOOTGATE_MOSQUITTO_ADDR is unset; run scripts/ci-mosquitto.sh")
				}
				t.Skip("SKIPPED: real Mosquitto not configured; set SCOOTGATE_MOSQUITTO_ADDR (scripts/ci-mosquitto.sh) to run this against it")
			}
			return testBroker{name: "mosquitto", addr: addr}
		},
	}
}

// forEachBroker runs f as a subtest per broker.
func forEachBroker(t *testing.T, f func(t *testing.T, b testBroker)) {
	for i, mk := range brokers(t) {
		name := []string{"mochi", "mosquitto"}[i]
		t.Run(name, func(t *testing.T) { f(t, mk(t)) })
	}
}

// uniqueTopic keeps tests that share a Mosquitto apart.
func uniqueTopic(t testing.TB) string {
	return fmt.Sprintf("scootgate-test/%d-%d/usage", os.Getpid(), time.Now().UnixNano())
}

// subscriber counts the payloads delivered on a topic.
type subscriber struct {
	c  paho.Client
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func subscribe(t testing.TB, addr, topic string) *subscriber {
	t.Helper()
	s := &subscriber{n: map[string]int{}}
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("sub-%d", time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(false).SetOrderMatters(false)
	s.c = paho.NewClient(o)
	if tok := s.c.Connect(); !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	tok := s.c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		s.mu.Lock()
		s.n[string(m.Payload())]++
		s.mu.Unlock()
	})
	if !tok.WaitTimeout(waitLimit) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { s.c.Disconnect(50) })
	return s
}

// got reports how many times p was delivered.
func (s *subscriber) got(p []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[string(p)]
}

func (s *subscriber) gotAll(ps [][]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		if s.n[string(p)] == 0 {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// publisher under test.

// testOptions are fast options for loopback tests.
func testOptions(addr, topic string) Options {
	return Options{
		Broker:         "tcp://" + addr,
		ClientID:       ClientID(fmt.Sprintf("test-%d", time.Now().UnixNano())),
		Topic:          topic,
		KeepAlive:      5 * time.Second,
		ConnectTimeout: 2 * time.Second,
		AckTimeout:     time.Minute, // tests that need it set it short
		BackoffMin:     time.Millisecond,
		BackoffMax:     20 * time.Millisecond,
		Rand:           func() float64 { return 0.5 },
	}
}

// runner is a Publisher running in the background.
type runner struct {
	p      *Publisher
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs p until stop or cleanup.
func start(t testing.TB, p *Publisher) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &runner{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it; Run must return nil promptly.
func (r *runner) stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("Run did not return within %s of cancel", waitLimit)
		}
	})
}

func newPublisher(t testing.TB, src Source, o Options) *Publisher {
	t.Helper()
	p, err := New(src, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// ---------------------------------------------------------------------------
// odds and ends.

// silentListener accepts TCP connections and never answers: a broker that
// hangs in CONNECT.
type silentListener struct {
	addr     string
	accepted atomic.Int32
}

func newSilentListener(t testing.TB) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{addr: ln.Addr().String()}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.accepted.Add(1)
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return s
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func secretOf(s string) secret.Secret { return secret.New(s) }

// testCA returns a client config trusting a fresh self-signed CA and a
// server config with a certificate it issued for 127.0.0.1.
func testCA(t testing.TB) (client, server *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "scootgate mqtt test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// startMochiTLS starts an embedded broker with a TLS listener.
func startMochiTLS(t testing.TB, hook *ackHook, tc *tls.Config) string {
	addr, _ := startMochiWith(t, "127.0.0.1:0", hook, tc)
	return addr
}
