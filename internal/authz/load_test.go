package authz_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

// fakeSource returns a scripted Fetch result and counts Forget calls.
type fakeSource struct {
	data    []byte
	changed bool
	err     error
	forgot  int
}

func (f *fakeSource) Fetch(context.Context) ([]byte, bool, error) { return f.data, f.changed, f.err }
func (f *fakeSource) Forget()                                     { f.forgot++ }

var (
	_ snapshot.Source    = (*fakeSource)(nil)
	_ snapshot.Forgetter = (*fakeSource)(nil)
)

func encode(t *testing.T, doc *authsnap.Snapshot) []byte {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// onlyKey returns a valid snapshot that accepts exactly rawKey.
func onlyKey(version uint64, rawKey string) *authsnap.Snapshot {
	return &authsnap.Snapshot{Schema: 1, Version: version, Keys: []authsnap.Key{
		{KeyID: "k_" + rawKey, TenantID: "t", Digest: authsnap.Digest(rawKey)},
	}}
}

// TestLoad walks one Store through a sequence of loads. After each step it
// checks the version and which of keyAll (in v5) and keyList (in v6 only)
// authenticate, so a step that wrongly replaced the index shows.
func TestLoad(t *testing.T) {
	errFetch := errors.New("control plane unreachable")
	invalid := onlyKey(9, keyList)
	invalid.Schema = 2

	type result struct {
		Changed   bool
		Version   uint64
		AllWorks  bool // keyAll authenticates
		ListWorks bool // keyList authenticates
		Forgot    int
	}
	steps := []struct {
		name    string
		src     fakeSource
		want    result
		wantErr any // nil, a sentinel error, or a pointer to an error type for errors.As
	}{
		{
			name: "first snapshot is applied",
			src:  fakeSource{data: encode(t, onlyKey(5, keyAll)), changed: true},
			want: result{Changed: true, Version: 5, AllWorks: true},
		},
		{
			name: "source unchanged",
			src:  fakeSource{},
			want: result{Version: 5, AllWorks: true},
		},
		{
			name:    "fetch error keeps the index",
			src:     fakeSource{err: errFetch},
			want:    result{Version: 5, AllWorks: true},
			wantErr: errFetch,
		},
		{
			name:    "decode error keeps the index",
			src:     fakeSource{data: []byte(`{"schema": 1, "version": 6, "keys": [`), changed: true},
			want:    result{Version: 5, AllWorks: true, Forgot: 1},
			wantErr: new(*authsnap.DecodeError),
		},
		{
			name:    "invalid snapshot keeps the index",
			src:     fakeSource{data: encode(t, invalid), changed: true},
			want:    result{Version: 5, AllWorks: true, Forgot: 1},
			wantErr: new(*authsnap.ValidationError),
		},
		{
			name: "equal version is no change, even with other content",
			src:  fakeSource{data: encode(t, onlyKey(5, keyList)), changed: true},
			want: result{Version: 5, AllWorks: true},
		},
		{
			name:    "lower version is rejected",
			src:     fakeSource{data: encode(t, onlyKey(4, keyList)), changed: true},
			want:    result{Version: 5, AllWorks: true, Forgot: 1},
			wantErr: authz.ErrOlderVersion,
		},
		{
			name: "next version is applied and revokes the old key",
			src:  fakeSource{data: encode(t, onlyKey(6, keyList)), changed: true},
			want: result{Changed: true, Version: 6, ListWorks: true},
		},
	}

	st := &authz.Store{}
	for _, step := range steps {
		src := step.src
		changed, err := authz.Load(t.Context(), &src, st)
		switch want := step.wantErr.(type) {
		case nil:
			if err != nil {
				t.Fatalf("%s: Load: %v", step.name, err)
			}
		case error:
			if !errors.Is(err, want) {
				t.Fatalf("%s: Load error = %v, want %v", step.name, err, want)
			}
		default:
			if err == nil || !errors.As(err, want) {
				t.Fatalf("%s: Load error = %v, want %T", step.name, err, want)
			}
		}
		_, allErr := st.Authenticate(bearer(keyAll), now)
		_, listErr := st.Authenticate(bearer(keyList), now)
		got := result{changed, st.Version(), allErr == nil, listErr == nil, src.forgot}
		if diff := cmp.Diff(got, step.want); diff != "" {
			t.Fatalf("%s: mismatch (-got +want):\n%s", step.name, diff)
		}
	}
}

// TestLoadConcurrent: concurrent loads of different versions end with the
// highest version, whatever the order; the losers see ErrOlderVersion or
// no change.
func TestLoadConcurrent(t *testing.T) {
	const n = 16
	st := &authz.Store{}
	var wg sync.WaitGroup
	for v := uint64(1); v <= n; v++ {
		src := &fakeSource{data: encode(t, onlyKey(v, keyAll)), changed: true}
		wg.Go(func() {
			if _, err := authz.Load(t.Context(), src, st); err != nil && !errors.Is(err, authz.ErrOlderVersion) {
				t.Errorf("Load v%d: %v", v, err)
			}
		})
	}
	wg.Wait()
	if got := st.Version(); got != n {
		t.Errorf("Version() = %d, want %d", got, n)
	}
}

const fixtures = "../../testdata/authz"

// TestLoadFixtures loads testdata/authz/valid.json through a file: source,
// as a node does, then offers every invalid fixture and checks each is
// rejected while valid.json's index keeps serving.
//
// valid.json holds the digests of these raw test keys:
//
//	k_alpha  sk-test-alpha-0123456789abcdef  models demo-gpt, demo-claude; expires 2030-01-01T00:00:00Z
//	k_bravo  sk-test-bravo-fedcba9876543210  all models, no expiry
func TestLoadFixtures(t *testing.T) {
	const (
		alpha = "sk-test-alpha-0123456789abcdef"
		bravo = "sk-test-bravo-fedcba9876543210"
	)
	src, err := snapshot.ParseSource("file:valid.json", fixtures, snapshot.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := &authz.Store{}
	changed, err := authz.Load(t.Context(), src, st)
	if err != nil || !changed || st.Version() != 42 {
		t.Fatalf("Load(valid.json) = %v, %v; version %d; want true, nil; version 42", changed, err, st.Version())
	}

	expiry := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	type result struct {
		KeyID     string
		Err       string
		GPT, Free bool // Allows("demo-gpt"), Allows("free-model")
	}
	check := func(t *testing.T, key string, at time.Time) result {
		p, err := st.Authenticate(http.Header{"X-Api-Key": {key}}, at)
		if err != nil {
			return result{Err: err.Error()}
		}
		return result{p.KeyID, "", p.Allows("demo-gpt"), p.Allows("free-model")}
	}
	checks := []struct {
		name string
		key  string
		at   time.Time
		want result
	}{
		{"alpha", alpha, now, result{KeyID: "k_alpha", GPT: true}},
		{"alpha expired", alpha, expiry, result{Err: authz.ErrExpired.Error()}},
		{"bravo", bravo, expiry, result{KeyID: "k_bravo", GPT: true, Free: true}},
		{"unknown", "sk-test-charlie-00000000000000", now, result{Err: authz.ErrUnknownKey.Error()}},
	}
	verify := func(t *testing.T) {
		t.Helper()
		for _, c := range checks {
			if diff := cmp.Diff(check(t, c.key, c.at), c.want); diff != "" {
				t.Errorf("%s: mismatch (-got +want):\n%s", c.name, diff)
			}
		}
	}
	verify(t)

	files, err := filepath.Glob(filepath.Join(fixtures, "invalid", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			// Give the bad document a version above 42 where it has one, so
			// that the version gate cannot be what rejects it.
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			data = []byte(strings.Replace(string(data), `"version": 1,`, `"version": 43,`, 1))
			path := filepath.Join(t.TempDir(), "authz.json")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			changed, err := authz.Load(t.Context(), &snapshot.FileSource{Path: path}, st)
			if err == nil || changed {
				t.Fatalf("Load = %v, %v; want false and an error", changed, err)
			}
			if errors.Is(err, authz.ErrOlderVersion) {
				t.Errorf("rejected by the version gate, not for its defect: %v", err)
			}
			if st.Version() != 42 {
				t.Errorf("version changed to %d", st.Version())
			}
			verify(t)
		})
	}
}

// TestLoadReportsBadFileEveryTime: a rejected file stays rejected on the
// next poll instead of turning into "unchanged".
func TestLoadReportsBadFileEveryTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.json")
	if err := os.WriteFile(path, []byte(`{"schema": 2, "version": 1, "keys": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src := &snapshot.FileSource{Path: path}
	st := &authz.Store{}
	for i := range 3 {
		var ve *authsnap.ValidationError
		if _, err := authz.Load(t.Context(), src, st); !errors.As(err, &ve) {
			t.Fatalf("poll %d: Load error = %v, want *authsnap.ValidationError", i, err)
		}
	}
}

// TestSecretsNeverInErrors is the §2 canary: whatever goes wrong, no error
// text contains the raw key, its digest, or a prefix of either.
func TestSecretsNeverInErrors(t *testing.T) {
	const canary = "sk-canary-7f3a9c1e5b2d4860aa"
	digest := authsnap.Digest(canary)
	var errs []error
	collect := func(_ any, err error) {
		if err == nil {
			t.Errorf("expected an error (#%d)", len(errs))
		}
		errs = append(errs, err)
	}

	// Authenticate, every failure.
	empty := &authz.Store{}
	collect(empty.Authenticate(bearer(canary), now))
	st := &authz.Store{}
	exp := now.Add(-time.Hour)
	st.Swap(mustCompile(t, &authsnap.Snapshot{Schema: 1, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k_exp", TenantID: "t", Digest: digest, ExpiresAt: &exp},
	}}))
	collect(st.Authenticate(bearer(canary), now))
	collect(st.Authenticate(bearer(canary+"x"), now))
	collect(st.Authenticate(bearer(canary+" "+canary), now))
	collect(st.Authenticate(http.Header{"X-Api-Key": {canary + "\x00"}}, now))

	// Compile and Load with documents that hold the digest.
	dup := &authsnap.Snapshot{Schema: 1, Version: 2, Keys: []authsnap.Key{
		{KeyID: "a", TenantID: "t", Digest: digest},
		{KeyID: "b", TenantID: "t", Digest: digest},
		{KeyID: "c", TenantID: "t", Digest: strings.ToUpper(digest)},
	}}
	collect(authz.Compile(dup))
	collect(authz.Load(t.Context(), &fakeSource{data: encode(t, dup), changed: true}, st))
	collect(authz.Load(t.Context(), &fakeSource{data: []byte(`{"keys": [{"digest": "` + digest + `", "x": 1}]}`), changed: true}, st))
	collect(authz.Load(t.Context(), &fakeSource{data: []byte(`{"keys": [{"digest": "` + digest + `"}]} ` + canary), changed: true}, st))

	for _, err := range errs {
		if err == nil {
			continue
		}
		msg := strings.ToLower(err.Error())
		for _, secret := range []string{canary, digest, canary[:10], digest[:8], digest[len(digest)-8:]} {
			if strings.Contains(msg, secret) {
				t.Errorf("error %q contains a secret or part of one", err)
			}
		}
	}
}

// FuzzDecode: Decode never panics, and a document that decodes and
// validates always compiles, with one principal per enabled key.
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{fixtures, filepath.Join(fixtures, "invalid")} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := authsnap.Decode(data)
		if err != nil || doc.Validate() != nil {
			return
		}
		ix, err := authz.Compile(doc)
		if err != nil {
			t.Fatalf("valid document did not compile: %v", err)
		}
		enabled := 0
		for _, k := range doc.Keys {
			if !k.Disabled {
				enabled++
			}
		}
		if ix.Len() != enabled || ix.Version() != doc.Version {
			t.Fatalf("index has %d keys at version %d, want %d at %d", ix.Len(), ix.Version(), enabled, doc.Version)
		}
	})
}
