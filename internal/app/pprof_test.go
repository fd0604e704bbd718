package app

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestPprofOffByDefault: without Options.Pprof no listener serves the
// profiles: not the API, not the health listener.
func TestPprofOffByDefault(t *testing.T) {
	s := startStack(t, stackOptions{})
	if s.pprof != "" {
		t.Fatalf("a profiling listener opened at %s without Options.Pprof", s.pprof)
	}
	for _, base := range []string{s.api, s.health} {
		if code, _ := get(t, base+"/debug/pprof/"); code == http.StatusOK {
			t.Errorf("%s/debug/pprof/ answered 200", base)
		}
	}
}

// TestPprofOn: with Options.Pprof the profiles are served there, on their
// own listener; the API and health listeners still do not serve them.
func TestPprofOn(t *testing.T) {
	s := startStack(t, stackOptions{pprof: "127.0.0.1:0"})
	if s.pprof == "" {
		t.Fatal("no profiling listener")
	}
	code, body := get(t, s.pprof+"/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Fatalf("/debug/pprof/: %d, want 200 and the index of profiles:\n%s", code, body)
	}
	if code, body := get(t, s.pprof+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("/debug/pprof/goroutine?debug=1: %d\n%.300s", code, body)
	}
	if code, _ := get(t, s.pprof+"/v1/models"); code != http.StatusNotFound {
		t.Errorf("the profiling listener answered /v1/models with %d, want 404", code)
	}
	for _, base := range []string{s.api, s.health} {
		if code, _ := get(t, base+"/debug/pprof/"); code == http.StatusOK {
			t.Errorf("%s/debug/pprof/ answered 200", base)
		}
	}
}

func TestCheckPprofAddr(t *testing.T) {
	tests := []struct {
		addr        string
		allowRemote bool
		wantErr     error
	}{
		{addr: "127.0.0.1:6060"},
		{addr: "[::1]:6060"},
		{addr: "localhost:6060"},
		{addr: "127.0.0.2:0"},
		{addr: ":6060", wantErr: ErrPprofNotLoopback},
		{addr: "0.0.0.0:6060", wantErr: ErrPprofNotLoopback},
		{addr: "10.1.2.3:6060", wantErr: ErrPprofNotLoopback},
		{addr: "pprof.example:6060", wantErr: ErrPprofNotLoopback}, // no name is resolved
		{addr: "0.0.0.0:6060", allowRemote: true},
	}
	for _, tc := range tests {
		err := CheckPprofAddr(tc.addr, tc.allowRemote)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("CheckPprofAddr(%q, %v) = %v, want %v", tc.addr, tc.allowRemote, err, tc.wantErr)
		}
	}
	if err := CheckPprofAddr("6060", false); err == nil || !strings.Contains(err.Error(), `"6060"`) {
		t.Errorf("CheckPprofAddr(\"6060\") = %v, want an error naming the address", err)
	}
}
