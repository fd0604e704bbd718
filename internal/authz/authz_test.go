package authz_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/limits"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

var (
	now     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	expires = now.Add(time.Hour)
)

// Raw test keys; snapshots only ever hold their digests.
const (
	keyAll      = "sk-test-all-models-0001"
	keyList     = "sk-test-allowlist-0002"
	keyNone     = "sk-test-no-models-0003"
	keyExpiring = "sk-test-expiring-0004"
	keyDisabled = "sk-test-disabled-0005"
	keyUnknown  = "sk-test-not-in-snapshot"
)

func testSnapshot(version uint64) *authsnap.Snapshot {
	exp := expires // TestCompile edits the document's copy
	return &authsnap.Snapshot{
		Schema: authsnap.Schema, Version: version,
		Keys: []authsnap.Key{
			{KeyID: "k_all", TenantID: "t_1", Digest: authsnap.Digest(keyAll)},
			{KeyID: "k_list", TenantID: "t_1", Digest: authsnap.Digest(keyList), Models: []string{"demo-gpt", "demo-claude"}},
			{KeyID: "k_none", TenantID: "t_2", Digest: authsnap.Digest(keyNone), Models: []string{}},
			{KeyID: "k_exp", TenantID: "t_2", Digest: authsnap.Digest(keyExpiring), ExpiresAt: &exp},
			{KeyID: "k_off", TenantID: "t_2", Digest: authsnap.Digest(keyDisabled), Disabled: true},
		},
	}
}

func mustCompile(t testing.TB, doc *authsnap.Snapshot) *authz.Index {
	t.Helper()
	ix, err := authz.Compile(doc)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return ix
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

func TestAuthenticate(t *testing.T) {
	loaded := &authz.Store{KeyHeaders: keyHeaders}
	loaded.Swap(mustCompile(t, testSnapshot(1)))

	tests := []struct {
		name    string
		store   *authz.Store
		h       http.Header
		now     time.Time
		want    *authz.Principal
		wantErr error
	}{
		{name: "no snapshot", store: &authz.Store{}, h: bearer(keyAll), now: now, wantErr: authz.ErrNoSnapshot},
		{name: "no snapshot, no key", store: &authz.Store{}, h: http.Header{}, now: now, wantErr: authz.ErrNoSnapshot},
		{name: "missing key", store: loaded, h: http.Header{}, now: now, wantErr: authz.ErrMissingKey},
		{name: "malformed key", store: loaded, h: bearer(keyAll + " extra"), now: now, wantErr: authz.ErrMissingKey},
		{name: "unknown key", store: loaded, h: bearer(keyUnknown), now: now, wantErr: authz.ErrUnknownKey},
		{name: "disabled key looks unknown", store: loaded, h: bearer(keyDisabled), now: now, wantErr: authz.ErrUnknownKey},
		{
			name: "bearer", store: loaded, h: bearer(keyAll), now: now,
			want: &authz.Principal{KeyID: "k_all", TenantID: "t_1"},
		},
		{
			name: "x-api-key", store: loaded, h: http.Header{"X-Api-Key": {keyList}}, now: now,
			want: &authz.Principal{KeyID: "k_list", TenantID: "t_1", Models: []string{"demo-gpt", "demo-claude"}},
		},
		{
			name: "bearer wins", store: loaded, h: http.Header{"Authorization": {"Bearer " + keyAll}, "X-Api-Key": {keyUnknown}}, now: now,
			want: &authz.Principal{KeyID: "k_all", TenantID: "t_1"},
		},
		{
			name: "empty allowlist", store: loaded, h: bearer(keyNone), now: now,
			want: &authz.Principal{KeyID: "k_none", TenantID: "t_2", Models: []string{}},
		},
		{
			name: "just before expiry", store: loaded, h: bearer(keyExpiring), now: expires.Add(-time.Nanosecond),
			want: &authz.Principal{KeyID: "k_exp", TenantID: "t_2", ExpiresAt: expires},
		},
		{name: "at expiry", store: loaded, h: bearer(keyExpiring), now: expires, wantErr: authz.ErrExpired},
		{name: "after expiry", store: loaded, h: bearer(keyExpiring), now: expires.Add(24 * time.Hour), wantErr: authz.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.store.Authenticate(tt.h, nil, tt.now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("principal mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// TestCompileLimits: a principal carries its own limits and its
// tenant's; a tenant the tenants list does not name has none.
func TestCompileLimits(t *testing.T) {
	doc := testSnapshot(1)
	doc.Keys[0].Limits = authsnap.Limits{RequestsPerMinute: 60}
	doc.Keys[1].Limits = authsnap.Limits{MaxConcurrent: 2}
	doc.Tenants = []authsnap.Tenant{{TenantID: "t_1", Limits: authsnap.Limits{TokensPerMinute: 1000}}, {TenantID: "t_other"}}
	lim := limits.New(limits.Options{})
	b := lim.Bind()
	ix, err := authz.CompileLimited(doc, b)
	if err != nil {
		t.Fatal(err)
	}
	b.Done()
	st := &authz.Store{}
	st.Swap(ix)
	type limited struct {
		Limits, TenantLimits authsnap.Limits
		Limited              bool
	}
	for _, tt := range []struct {
		key  string
		want limited
	}{
		{keyAll, limited{authsnap.Limits{RequestsPerMinute: 60}, authsnap.Limits{TokensPerMinute: 1000}, true}},
		{keyList, limited{authsnap.Limits{MaxConcurrent: 2}, authsnap.Limits{TokensPerMinute: 1000}, true}},
		{keyNone, limited{}}, // t_2 is not listed: no tenant limits
	} {
		p, err := st.Authenticate(bearer(tt.key), nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(limited{p.Limits, p.TenantLimits, p.Limited()}, tt.want); diff != "" {
			t.Errorf("%s: limits mismatch (-got +want):\n%s", p.KeyID, diff)
		}
		if (p.Limit != nil) != tt.want.Limited {
			t.Errorf("%s: bound to the limiter: %v, want %v", p.KeyID, p.Limit != nil, tt.want.Limited)
		}
	}
}

func TestPrincipalAllows(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		model  string
		want   bool
	}{
		{"nil allows all", nil, "anything", true},
		{"nil allows empty name", nil, "", true},
		{"empty allows none", []string{}, "demo-gpt", false},
		{"listed", []string{"demo-gpt", "demo-claude"}, "demo-claude", true},
		{"not listed", []string{"demo-gpt"}, "demo-claude", false},
		{"case-sensitive", []string{"demo-gpt"}, "Demo-GPT", false},
		{"no prefix match", []string{"demo-gpt"}, "demo-gpt-4", false},
		{"pattern", []string{"demo-gpt", "claude-*"}, "claude-sonnet-4-5", true},
		{"pattern needs a character after its prefix", []string{"claude-*"}, "claude-", false},
		{"pattern is a prefix, not a substring", []string{"claude-*"}, "my-claude-x", false},
		{"pattern is case-sensitive", []string{"claude-*"}, "Claude-x", false},
		{"a narrower pattern", []string{"claude-haiku-*"}, "claude-sonnet-4-5", false},
		{"catch-all", []string{"*"}, "anything", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &authz.Principal{Models: tt.models}
			if got := p.Allows(tt.model); got != tt.want {
				t.Errorf("Allows(%q) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	doc := testSnapshot(7)
	doc.GeneratedAt = now
	ix := mustCompile(t, doc)
	type summary struct {
		Version     uint64
		GeneratedAt time.Time
		Len         int
	}
	if diff := cmp.Diff(summary{ix.Version(), ix.GeneratedAt(), ix.Len()}, summary{7, now, 4}); diff != "" {
		t.Errorf("index mismatch (-got +want):\n%s", diff)
	}

	// The index owns its memory: editing the document afterwards changes
	// nothing.
	doc.Keys[1].Models[0] = "edited"
	*doc.Keys[3].ExpiresAt = now.Add(-time.Hour)
	st := &authz.Store{}
	st.Swap(ix)
	p, err := st.Authenticate(bearer(keyList), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allows("demo-gpt") || p.Allows("edited") {
		t.Errorf("index shares the allowlist with the document: %v", p.Models)
	}
	if _, err := st.Authenticate(bearer(keyExpiring), nil, now); err != nil {
		t.Errorf("index shares expires_at with the document: %v", err)
	}
}

func TestCompileRejectsInvalid(t *testing.T) {
	doc := testSnapshot(1)
	doc.Keys[1].Digest = doc.Keys[0].Digest
	_, err := authz.Compile(doc)
	var ve *authsnap.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Compile error = %v, want *authsnap.ValidationError", err)
	}
	if _, err := authz.Compile(nil); !errors.As(err, &ve) {
		t.Errorf("Compile(nil) error = %v, want *authsnap.ValidationError", err)
	}
}

func TestStore(t *testing.T) {
	st := &authz.Store{}
	type state struct {
		Loaded  bool
		Version uint64
	}
	if diff := cmp.Diff(state{st.Loaded(), st.Version()}, state{false, 0}); diff != "" {
		t.Errorf("zero Store mismatch (-got +want):\n%s", diff)
	}
	st.Swap(mustCompile(t, testSnapshot(3)))
	if diff := cmp.Diff(state{st.Loaded(), st.Version()}, state{true, 3}); diff != "" {
		t.Errorf("after Swap mismatch (-got +want):\n%s", diff)
	}
	st.Swap(nil)
	if _, err := st.Authenticate(bearer(keyAll), nil, now); !errors.Is(err, authz.ErrNoSnapshot) {
		t.Errorf("after Swap(nil): error = %v, want ErrNoSnapshot", err)
	}
}

// TestStoreConcurrentSwap: readers authenticating while the index is
// swapped always see a complete index, never nil after the first swap, and
// never an older one than they saw before.
func TestStoreConcurrentSwap(t *testing.T) {
	const (
		versions   = 100
		readers    = 4
		minQueries = 500
	)
	// Index v accepts the shared key as tenant "v", and a key of its own.
	indexes := make([]*authz.Index, versions+1)
	for v := 1; v <= versions; v++ {
		indexes[v] = mustCompile(t, &authsnap.Snapshot{Schema: 1, Version: uint64(v), Keys: []authsnap.Key{
			{KeyID: "shared", TenantID: strconv.Itoa(v), Digest: authsnap.Digest(keyAll)},
			{KeyID: "own", TenantID: strconv.Itoa(v), Digest: authsnap.Digest(fmt.Sprintf("sk-own-%d", v))},
		}})
	}
	st := &authz.Store{}
	st.Swap(indexes[1])

	done := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			last := 0
			for i := 0; ; i++ {
				if i >= minQueries {
					select {
					case <-done:
						return
					default:
					}
				}
				p, err := st.Authenticate(bearer(keyAll), nil, now)
				if err != nil {
					t.Errorf("Authenticate during swaps: %v", err)
					return
				}
				v, _ := strconv.Atoi(p.TenantID)
				if v < last {
					t.Errorf("saw index %d after index %d", v, last)
					return
				}
				last = v
				// The version read afterwards is at least the index used.
				if sv := st.Version(); sv < uint64(v) {
					t.Errorf("Version() = %d after authenticating against index %d", sv, v)
					return
				}
			}
		})
	}
	for v := 2; v <= versions; v++ {
		st.Swap(indexes[v])
	}
	close(done)
	wg.Wait()

	// Only the last index's own key works now.
	if _, err := st.Authenticate(bearer(fmt.Sprintf("sk-own-%d", versions)), nil, now); err != nil {
		t.Errorf("newest key rejected: %v", err)
	}
	if _, err := st.Authenticate(bearer("sk-own-1"), nil, now); !errors.Is(err, authz.ErrUnknownKey) {
		t.Errorf("key from a replaced index: error = %v, want ErrUnknownKey", err)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	const n = 10000
	doc := &authsnap.Snapshot{Schema: 1, Version: 1, Keys: make([]authsnap.Key, n)}
	for i := range n {
		doc.Keys[i] = authsnap.Key{
			KeyID: "k" + strconv.Itoa(i), TenantID: "t", Models: []string{"demo-gpt"},
			Digest: authsnap.Digest(fmt.Sprintf("sk-bench-%032d", i)),
		}
	}
	st := &authz.Store{KeyHeaders: keyHeaders}
	st.Swap(mustCompile(b, doc))
	cases := []struct {
		name    string
		h       http.Header
		wantErr error
	}{
		{"bearer", bearer(fmt.Sprintf("sk-bench-%032d", n/2)), nil},
		{"x-api-key", http.Header{"X-Api-Key": {fmt.Sprintf("sk-bench-%032d", n/3)}}, nil},
		{"unknown", bearer(fmt.Sprintf("sk-bench-%032d", n+1)), authz.ErrUnknownKey},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Authenticate(bc.h, nil, now); !errors.Is(err, bc.wantErr) {
					b.Fatalf("Authenticate: %v", err)
				}
			}
		})
	}
}

// TestAuthenticateDoesNotAllocate guards the hot path: hashing a key longer
// than 32 bytes must not copy it to the heap.
func TestAuthenticateDoesNotAllocate(t *testing.T) {
	st := &authz.Store{KeyHeaders: keyHeaders}
	st.Swap(mustCompile(t, testSnapshot(1)))
	long := strings.Repeat("k", authz.MaxKeyLength)
	for _, h := range []http.Header{bearer(keyAll), bearer(long), {"X-Api-Key": {keyList}}} {
		if n := testing.AllocsPerRun(100, func() { _, _ = st.Authenticate(h, nil, now) }); n != 0 {
			t.Errorf("Authenticate allocates %v times per call", n)
		}
	}
}
