package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"golang.org/x/net/proxy"

	"github.com/scootgate/scootgate/internal/app"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/logbuf"
	"github.com/scootgate/scootgate/internal/logline"
)

// The two systems under test, each in its own process so that CPU time is
// charged to each alone.

// profiles writes a CPU profile for the process's life and an allocation
// profile at its end, when the paths are set.
type profiles struct {
	cpu, mem string
	idle     bool // the idle-stream test's process: a finer heap profile
}

func (p *profiles) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&p.mem, "memprofile", "", "write an allocation profile at exit to this file")
	fs.BoolVar(&p.idle, "idle-profile", false, "sample the heap profile every 64 KiB (the idle-stream test)")
}

func (p *profiles) start() (stop func(), err error) {
	if p.idle {
		runtime.MemProfileRate = idleProfileRate
	}
	var f *os.File
	if p.cpu != "" {
		if f, err = os.Create(p.cpu); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
		}
		if p.mem != "" {
			if m, err := os.Create(p.mem); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(m, 0)
				m.Close()
			}
		}
	}, nil
}

// runNode is -role=node: the real node, from a config file on disk through
// config.Load and app.Run, exactly as cmd/scootgate starts it.
func runNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "node config file")
	logPath := fs.String("log", "", "write the node's JSON log here (default: discard)")
	var prof profiles
	prof.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := childContext()
	defer stop()
	if _, err := raiseFDLimit(1 << 18); err != nil {
		fmt.Fprintln(os.Stderr, "node: fd limit:", err)
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		out := logbuf.New(f, logbuf.Options{}) // batched, as cmd/scootgate does
		defer out.Close()
		logger = slog.New(logline.NewHandler(out, nil)) // the node's handler at Info: one line per request, as cmd/scootgate logs
	}
	stopProf, err := prof.start()
	if err != nil {
		return err
	}
	defer stopProf()
	control, err := controlServer(ctx, func() any { return readSUTStats() })
	if err != nil {
		return err
	}
	var readyErr error
	err = app.Run(ctx, cfg, app.Options{
		Logger:  logger,
		BaseDir: filepath.Dir(*cfgPath),
		Listening: func(api, _ net.Addr) {
			rt := readRuntime()
			readyErr = printReady(readyLine{Control: control, API: api.String(), Runtime: &rt})
		},
	})
	return errors.Join(err, readyErr)
}

// runBaseline is -role=baseline: the thinnest Go proxy hop, a bare
// httputil.ReverseProxy with FlushInterval -1 whose transport reaches the
// provider through the same egress proxy as the node, with the node's
// egress transport settings (HTTP/1.1, no compression, 256 idle
// connections per host, 90 s idle timeout). Its only edit is the
// provider's key: in x-api-key on the Anthropic path (/v1/messages, as
// the node's anthropic backends send it), in Authorization elsewhere.
func runBaseline(args []string) error {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	provider := fs.String("provider", "", "provider root URL, http://127.0.0.1:PORT")
	egressURL := fs.String("egress", "", "socks5://HOST:PORT or http://HOST:PORT (CONNECT)")
	firstByte := fs.Duration("first-byte", 0, "bound each round trip from its start to the response headers, as the node's timeouts.first_byte (0: none)")
	var prof profiles
	prof.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := childContext()
	defer stop()
	if _, err := raiseFDLimit(1 << 18); err != nil {
		fmt.Fprintln(os.Stderr, "baseline: fd limit:", err)
	}
	rp, err := newBaselineProxy(*provider, *egressURL, os.Getenv(providerKeyEnv), *firstByte)
	if err != nil {
		return err
	}
	quiet := log.New(io.Discard, "", 0)
	srv := &http.Server{
		Handler:           rp,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          quiet,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	stopProf, err := prof.start()
	if err != nil {
		return err
	}
	defer stopProf()
	control, err := controlServer(ctx, func() any { return readSUTStats() })
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	rt := readRuntime()
	if err := printReady(readyLine{Control: control, API: ln.Addr().String(), Runtime: &rt}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	<-served
	return nil
}

// newBaselineProxy is the baseline's handler: a bare ReverseProxy to
// provider through egress, swapping key in; with firstByte > 0 each round
// trip must have its response headers within it (firstByteTransport).
func newBaselineProxy(provider, egress, key string, firstByte time.Duration) (*httputil.ReverseProxy, error) {
	target, err := url.Parse(provider)
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	dial, err := egressDialer(egress)
	if err != nil {
		return nil, err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	transport := &http.Transport{
		DialContext:        dial,
		Protocols:          &protocols,
		DisableCompression: true,
		// The node's idle pool: as many as its default
		// limits.max_concurrent_requests, per host and in all.
		MaxIdleConns:        10000,
		MaxIdleConnsPerHost: 10000,
		IdleConnTimeout:     90 * time.Second,
	}
	var rt http.RoundTripper = transport
	if firstByte > 0 {
		rt = &firstByteTransport{rt: transport, limit: firstByte}
	}
	auth := "Bearer " + key
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			if pr.In.URL.Path == apiPaths[pathAnthropic].url {
				pr.Out.Header.Set("X-Api-Key", key)
			} else {
				pr.Out.Header.Set("Authorization", auth)
			}
		},
		FlushInterval: -1,
		Transport:     rt,
		ErrorLog:      log.New(os.Stderr, "baseline: ", log.LstdFlags), // the harness keeps it in <work dir>/baseline.stderr
	}
	// ReverseProxy's own handler, but a first-byte timeout is the node's
	// 504, not a 502.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		rp.ErrorLog.Printf("http: proxy error: %v", err)
		code := http.StatusBadGateway
		if errors.Is(err, errFirstByte) {
			code = http.StatusGatewayTimeout
		}
		w.WriteHeader(code)
	}
	return rp, nil
}

// errFirstByte is a baseline round trip without response headers within
// its -first-byte limit.
var errFirstByte = errors.New("baseline: no response headers within the first-byte limit")

// firstByteTransport gives the baseline the node's first-byte timeout for
// a whole answer (docs/api.md "Timeouts"): limit runs from the start of
// the round trip, dial and tunnel included, to the response headers; the
// body is then unbounded (the node's non_stream_total is far longer than
// any answer here).
type firstByteTransport struct {
	rt    http.RoundTripper
	limit time.Duration
}

func (t *firstByteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	timer := time.AfterFunc(t.limit, func() { cancel(errFirstByte) })
	resp, err := t.rt.RoundTrip(r.WithContext(ctx))
	if err != nil {
		timer.Stop()
		if cause := context.Cause(ctx); errors.Is(cause, errFirstByte) && !errors.Is(err, errFirstByte) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		cancel(nil)
		return nil, err
	}
	if !timer.Stop() { // fired as the headers came in: the limit has passed
		resp.Body.Close()
		cancel(nil)
		return nil, errFirstByte
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its round trip's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// egressDialer returns the baseline's tunnel dialer: golang.org/x/net/proxy
// for socks5:// (what the node's egress uses too), a minimal CONNECT
// handshake for http://. net/http's own Proxy would not do: for an http://
// target it forwards a GET instead of tunnelling.
func egressDialer(raw string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	switch u.Scheme {
	case "socks5":
		d, err := proxy.SOCKS5("tcp", u.Host, nil, &net.Dialer{Timeout: 10 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
		cd, ok := d.(proxy.ContextDialer)
		if !ok {
			return nil, errors.New("egress: socks5 dialer takes no context")
		}
		return cd.DialContext, nil
	case "http":
		return connectDial(u.Host), nil
	}
	return nil, fmt.Errorf("egress: unsupported scheme %q", u.Scheme)
}

// errConnectRefused is a CONNECT answered with anything but 200.
var errConnectRefused = errors.New("egress: CONNECT refused")

func connectDial(proxyAddr string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", proxyAddr)
		if err != nil {
			return nil, err
		}
		deadline := time.Now().Add(10 * time.Second)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = c.SetDeadline(deadline)
		if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr); err != nil {
			c.Close()
			return nil, err
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			c.Close()
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || br.Buffered() > 0 {
			c.Close()
			return nil, fmt.Errorf("%w: %s", errConnectRefused, resp.Status)
		}
		_ = c.SetDeadline(time.Time{})
		return c, nil
	}
}
