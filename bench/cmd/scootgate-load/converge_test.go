package main

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// TestFleetDocuments keeps the converge benchmark's inputs valid: the node
// config loads, both snapshots validate, and version v of the
// authorization snapshot revokes exactly the key of round v-1.
func TestFleetDocuments(t *testing.T) {
	t.Setenv(providerKeyEnv, "k")
	cp, err := cpserver.Listen("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	path := filepath.Join(t.TempDir(), "node.toml")
	o := convergeOptions{longPoll: 30 * time.Second, pollInterval: 10 * time.Second}
	if err := os.WriteFile(path, []byte(fleetTOML(3, cp, o)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("fleet config does not load: %v", err)
	}
	if cfg.ControlPlane.LongPoll != o.longPoll || cfg.Routes.Source != cp.URL(cpserver.RoutesPath) || cfg.Usage.Enabled {
		t.Errorf("control plane %+v, routes %q, usage %v", cfg.ControlPlane, cfg.Routes.Source, cfg.Usage.Enabled)
	}
	// Signed: the nodes require signatures with the key beside their
	// directories.
	signedDir := filepath.Join(t.TempDir(), "node-03")
	if err := os.MkdirAll(signedDir, 0o700); err != nil {
		t.Fatal(err)
	}
	pk, _, _ := ed25519.GenerateKey(nil)
	if err := os.WriteFile(filepath.Join(signedDir, "..", "cp.pub"), snapsign.MarshalPublicKey(pk), 0o600); err != nil {
		t.Fatal(err)
	}
	o.signed = true
	signedPath := filepath.Join(signedDir, "node.toml")
	if err := os.WriteFile(signedPath, []byte(fleetTOML(3, cp, o)), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Load(signedPath); err != nil || len(cfg.Routes.VerifyKeys) != 1 || len(cfg.Authz.VerifyKeys) != 1 {
		t.Fatalf("signed fleet config: %v", err)
	}

	routes := fleetRoutes(2)
	if err := routes.Validate(); err != nil {
		t.Errorf("routes: %v", err)
	}
	authz := fleetAuthz(2)
	if err := authz.Validate(); err != nil {
		t.Errorf("authz: %v", err)
	}
	has := func(doc authsnap.Snapshot, key string) bool {
		for _, k := range doc.Keys {
			if k.Digest == authsnap.Digest(key) {
				return true
			}
		}
		return false
	}
	if !has(fleetAuthz(1), fleetKey(1)) || has(fleetAuthz(2), fleetKey(1)) || !has(fleetAuthz(2), fleetKey(2)) {
		t.Error("version 2 must revoke round 1's key and keep round 2's")
	}
}

func TestQuantile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0.5: 5, 0.99: 10, 0.1: 1, 1: 10} {
		if got := quantile(d, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
}
