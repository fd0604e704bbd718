package authz_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/authz"
	"github.com/scootgate/scootgate/pkg/authsnap"
)

func encode(t *testing.T, doc *authsnap.Snapshot) []byte {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeApply takes an authorization snapshot the way the node's poller
// does: decode, validate the whole document, compile, swap.
func decodeApply(st *authz.Store, data []byte) error {
	doc, err := authsnap.Decode(data)
	if err != nil {
		return err
	}
	if err := doc.Validate(); err != nil {
		return err
	}
	ix, err := authz.Compile(doc)
	if err != nil {
		return err
	}
	st.Swap(ix)
	return nil
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
	valid, err := os.ReadFile(filepath.Join(fixtures, "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := &authz.Store{KeyHeaders: keyHeaders}
	if err := decodeApply(st, valid); err != nil || st.Version() != 42 {
		t.Fatalf("valid.json: %v; version %d; want nil, version 42", err, st.Version())
	}

	expiry := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	type result struct {
		KeyID     string
		Err       string
		GPT, Free bool // Allows("demo-gpt"), Allows("free-model")
	}
	check := func(t *testing.T, key string, at time.Time) result {
		p, err := st.Authenticate(http.Header{"X-Api-Key": {key}}, nil, at)
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
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := decodeApply(st, data); err == nil {
				t.Fatal("an invalid document was applied")
			}
			if st.Version() != 42 {
				t.Errorf("version changed to %d", st.Version())
			}
			verify(t)
		})
	}
}

// TestSecretsNeverInErrors is the raw-key canary (docs/authorization.md): whatever goes wrong, no error
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
	empty := &authz.Store{KeyHeaders: keyHeaders}
	collect(empty.Authenticate(bearer(canary), nil, now))
	st := &authz.Store{KeyHeaders: keyHeaders}
	exp := now.Add(-time.Hour)
	st.Swap(mustCompile(t, &authsnap.Snapshot{Schema: 1, Version: 1, Keys: []authsnap.Key{
		{KeyID: "k_exp", TenantID: "t", Digest: digest, ExpiresAt: &exp},
	}}))
	collect(st.Authenticate(bearer(canary), nil, now))
	collect(st.Authenticate(bearer(canary+"x"), nil, now))
	collect(st.Authenticate(bearer(canary+" "+canary), nil, now))
	collect(st.Authenticate(http.Header{"X-Api-Key": {canary + "\x00"}}, nil, now))

	// Compile and decode documents that hold the digest.
	dup := &authsnap.Snapshot{Schema: 1, Version: 2, Keys: []authsnap.Key{
		{KeyID: "a", TenantID: "t", Digest: digest},
		{KeyID: "b", TenantID: "t", Digest: digest},
		{KeyID: "c", TenantID: "t", Digest: strings.ToUpper(digest)},
	}}
	collect(authz.Compile(dup))
	collect(nil, decodeApply(st, encode(t, dup)))
	collect(nil, decodeApply(st, []byte(`{"keys": [{"digest": "`+digest+`", "x": 1}]}`)))
	collect(nil, decodeApply(st, []byte(`{"keys": [{"digest": "`+digest+`"}]} `+canary)))

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
