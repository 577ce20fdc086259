package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/ui"
	"github.com/idemrun/idemrun/metrics"
	"github.com/idemrun/idemrun/runner"
	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

func (m *Main) run(ctx context.Context, args []string) error {
	fs, db := m.flags("run", "[--workers N] [--until-idle] [--admin ADDR --admin-token-file FILE] [--ca-file FILE] [--client-cert FILE --client-key FILE]")
	wf := addWorkerFlags(fs, runner.DefaultWorkers, "jobs worked at once")
	untilIdle := fs.Bool("until-idle", false, "exit 0 once no job is pending, running or unknown")
	adminAddr := fs.String("admin", "", "also serve the admin API on TCP ADDR (needs --admin-token-file)")
	tokenFile := fs.String("admin-token-file", "", "file holding the bearer token for --admin")
	noSocket := fs.Bool("no-socket", false, "do not serve the admin API on the unix socket beside the database")
	pollOnly := fs.Bool("poll-only", false, "with a postgres:// --db: find work by polling alone, without LISTEN (for PgBouncer in transaction mode)")
	allow := fs.StringArray("allow-host", nil, "only send to these hosts (repeatable; exact or *.example.com)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	quiet := fs.Duration("quiet-period", runner.DefaultQuietPeriod, "wait before the first status query of an unknown job")
	settle := fs.Duration("settle", runner.DefaultSettle, "settle window of hosts whose policy and * set none (idemrun host set --settle): a status \"not found\" leads to a replay only this long after the attempt started; 0 for none")
	backoffBase := fs.Duration("backoff-base", runner.DefaultBackoffBase, "full-jitter backoff base")
	backoffCap := fs.Duration("backoff-cap", runner.DefaultBackoffCap, "full-jitter backoff cap")
	statusBackoffBase := fs.Duration("status-backoff-base", runner.DefaultStatusBackoffBase, "backoff base between status queries")
	statusTimeout := fs.Duration("status-timeout", statusquery.DefaultTimeout, "timeout of one status query")
	statusBudget := fs.Int("status-budget", runner.DefaultStatusBudget, "status queries per unknown episode")
	retryAfterCap := fs.Duration("retry-after-cap", runner.DefaultRetryAfterCap, "longest Retry-After honored; longer stops the job")
	grace := fs.Duration("shutdown-grace", runner.DefaultShutdownGrace, "time in-flight attempts get to finish on SIGINT/SIGTERM")
	poll := fs.Duration("poll-interval", runner.DefaultPollInterval, "longest sleep when no work is due")
	spread := fs.Duration("startup-spread", runner.DefaultStartupSpread, "spread due work over this long after start")
	leaseTTL := fs.Duration("lease-ttl", runner.DefaultLeaseTTL, "how long this runner's lease lasts without a heartbeat (it beats every third of it); its running jobs are rescued by the next runner once it expires")
	retention := fs.Duration("retention", 7*24*time.Hour, "delete succeeded/failed/canceled jobs older than this (0 keeps all, and turns the sweep off: keys reserved by earlier sweeps stay reserved)")
	keyRetention := fs.Duration("key-retention", 30*24*time.Hour, "keep deleted jobs' keys reserved this long after their last update (at least --retention)")
	caFile := fs.String("ca-file", "", "PEM file of CA certificates trusted for https targets and status URLs, besides the system's")
	clientCert := fs.String("client-cert", "", "PEM client certificate presented to https targets and status URLs that ask for one (mTLS; with --client-key)")
	clientKey := fs.String("client-key", "", "PEM private key of --client-cert")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("run: unexpected argument %q", fs.Arg(0))
	}
	if err := wf.check(); err != nil {
		return err
	}
	// In flag order, so the first bad one is always the one named.
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"quiet-period", *quiet}, {"backoff-base", *backoffBase}, {"backoff-cap", *backoffCap},
		{"status-timeout", *statusTimeout}, {"retry-after-cap", *retryAfterCap}, {"shutdown-grace", *grace}, {"poll-interval", *poll},
		{"startup-spread", *spread}, {"status-backoff-base", *statusBackoffBase}, {"lease-ttl", *leaseTTL}} {
		if f.d <= 0 || f.d > 24*time.Hour {
			return &api.InvalidError{Field: f.name, Value: f.d.String(), Accepted: "a positive duration up to 24h"}
		}
	}
	if *backoffCap < *backoffBase {
		// Every delay would be the cap: a base above it is a mistake.
		return &api.InvalidError{Field: "backoff-cap", Value: backoffCap.String(), Accepted: fmt.Sprintf("a duration at least --backoff-base (%s), up to 24h", *backoffBase)}
	}
	tlsConfig, err := loadTLSFlags(*caFile, *clientCert, *clientKey)
	if err != nil {
		return err
	}
	if *settle < 0 || *settle > api.MaxHostSettle {
		return &api.InvalidError{Field: "settle", Value: settle.String(), Accepted: api.SettleAccepted}
	}
	if *statusBudget < 1 || *statusBudget > 10000 {
		return &api.InvalidError{Field: "status-budget", Value: fmt.Sprint(*statusBudget), Accepted: "an integer from 1 to 10000"}
	}
	if *tokenFile != "" && *adminAddr == "" {
		return usagef("run: --admin-token-file is the token of the TCP admin API; give --admin ADDR with it (the unix socket needs no token)")
	}
	if *keyRetention < 0 {
		return &api.InvalidError{Field: "key-retention", Value: keyRetention.String(), Accepted: "a duration ≥ 0 (values below --retention mean keys go with their jobs)"}
	}
	if *retention < 0 {
		return &api.InvalidError{Field: "retention", Value: retention.String(), Accepted: "0 (keep all) or a positive duration"}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return &api.InvalidError{Field: "log-level", Value: fmt.Sprintf("%q", *logLevel), Accepted: "debug, info, warn, error"}
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level})
	case "json":
		handler = slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: level})
	default:
		return &api.InvalidError{Field: "log-format", Value: fmt.Sprintf("%q", *logFormat), Accepted: "text or json"}
	}
	logger := slog.New(handler)
	token := ""
	if *adminAddr != "" {
		if *tokenFile == "" {
			return usagef("run: --admin %s needs --admin-token-file: the admin API on TCP is refused without a bearer token", *adminAddr)
		}
		var err error
		if token, err = readTokenFile("admin-token-file", *tokenFile); err != nil {
			return err
		}
	}

	tuneGC(m.Getenv)
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	if *pollOnly && !dbt.isURL() {
		return &api.InvalidError{Field: "poll-only", Value: "true", Accepted: "with a postgres:// --db only (a bbolt file is worked by one process, which hears its own enqueues)"}
	}
	if err := dbDirError(dbt); err != nil {
		return err
	}
	path := dbt.path
	_, statErr := os.Stat(path)
	opts := dbt.options(&api.Options{AllowHosts: *allow, Direct: true})
	if opts.Postgres != nil {
		opts.Postgres.PollOnly = *pollOnly
	}
	client, err := m.open(path, opts)
	if err != nil {
		if dbt.isURL() {
			return openDBError(dbt, err)
		}
		return err
	}
	defer client.Close()
	if !dbt.isURL() && errors.Is(statErr, os.ErrNotExist) {
		// A runner may start before anything is enqueued, so a missing
		// file is created; a mistyped --db would otherwise look like a
		// runner with nothing to do.
		logger.Warn("created a new, empty database; if you meant an existing one, check --db or $IDEMRUN_DB", "db", path)
	}

	checker := &statusquery.HTTPChecker{Timeout: *statusTimeout, TLSConfig: tlsConfig}
	met := metrics.New(client.Store())
	cfg := runner.Config{
		Workers:         *wf.workers,
		MaxConnsPerHost: *wf.maxConns,
		NetHTTP:         wf.netHTTP(),
		UntilIdle:       *untilIdle,
		Logger:          logger,
		Backoff:         runner.Backoff{Base: *backoffBase, Cap: *backoffCap},
		StatusBackoff:   runner.Backoff{Base: *statusBackoffBase, Cap: max(*backoffCap, *statusBackoffBase)},
		QuietPeriod:     *quiet,
		Settle:          runSettle(*settle),
		LeaseTTL:        *leaseTTL,
		StatusBudget:    *statusBudget,
		RetryAfterCap:   *retryAfterCap,
		ShutdownGrace:   *grace,
		PollInterval:    *poll,
		StartupSpread:   *spread,
		HTTPChecker:     checker,
		OnEvent:         met.ObserveEvent,
		TLSConfig:       tlsConfig,
	}
	r, err := client.NewRunner(cfg)
	if err != nil {
		return err
	}
	var current currentRunner
	current.p.Store(r)
	met.WatchHosts(&current)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dash := ui.Handler(client, ui.Options{Logger: logger})
	handler2 := admin.Handler(client, admin.Options{Metrics: met.Handler(), UI: dash})
	// A Postgres database is shared, not held: commands reach it directly.
	if !*noSocket && !dbt.isURL() {
		closeSock, err := serveSocket(api.SocketPath(path), handler2, logger)
		if err != nil {
			return err
		}
		defer closeSock()
	}
	if *adminAddr != "" {
		ln, err := net.Listen("tcp", *adminAddr)
		if err != nil {
			return fmt.Errorf("admin api: listen %s: %w", *adminAddr, err)
		}
		srv := adminServer(admin.Handler(client, admin.Options{Token: token, Metrics: met.Handler(), Logger: logger, UI: dash}))
		go func() { _ = srv.Serve(limitListener(ln, maxAdminConns)) }()
		defer srv.Close()
		logger.Info("admin api on tcp", "addr", ln.Addr().String())
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			logger.Warn("admin api listens beyond loopback over plain HTTP: its bearer token and backups (stored credentials included) cross the network unencrypted; put it behind TLS or bind 127.0.0.1", "addr", ln.Addr().String())
		}
	}
	if *retention > 0 {
		go sweepLoop(ctx, client, *retention, *keyRetention, logger)
	}
	logger.Info("runner started", "db", dbt.String(), "workers", *wf.workers, "pid", os.Getpid())
	for {
		lost := r.Run(ctx)
		if lost == nil {
			break
		}
		if !errors.Is(lost, store.ErrLeaseLost) || ctx.Err() != nil {
			return &stoppedError{lost}
		}
		// Cut off from the database for longer than its lease (an
		// outage, a failover): its claims are another runner's to
		// rescue, and its late outcomes are refused by their fence. The
		// process goes on as a new runner, with a lease of its own, and
		// may rescue its former self's jobs like any other's.
		cfg.ID = ""
		if r, err = client.NewRunner(cfg); err != nil {
			return err
		}
		current.p.Store(r)
		logger.Warn("runner lease lost; starting again as a new runner", "err", lost, "runner", r.ID())
	}
	logger.Info("runner stopped")
	return nil
}

// currentRunner is the runner a run process works with now: a new one
// after a lost lease. The metrics read its host figures.
type currentRunner struct{ p atomic.Pointer[runner.Runner] }

func (c *currentRunner) HostFigures() []runner.HostFigures { return c.p.Load().HostFigures() }

// serveSocket serves h on a unix socket at sock, mode 0600. A socket left by
// a crashed runner is replaced: this process holds the database lock, so no
// live runner can own it.
func serveSocket(sock string, h http.Handler, logger *slog.Logger) (func(), error) {
	if !privateSockets {
		logger.Warn("no admin socket on this platform (its owner cannot be checked); CLI commands cannot reach this runner", "socket", sock)
		return func() {}, nil
	}
	if len(sock) > 100 {
		logger.Warn("database path too long for an admin socket; CLI commands cannot reach this runner", "socket", sock)
		return func() {}, nil
	}
	if fi, err := os.Lstat(sock); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("admin socket: %s exists and is not a socket; remove it or move the database", sock)
		}
		if err := os.Remove(sock); err != nil {
			return nil, fmt.Errorf("admin socket: removing stale %s: %w", sock, err)
		}
		logger.Info("replaced stale admin socket", "socket", sock)
	}
	var ln net.Listener
	var err error
	withPrivateUmask(func() { ln, err = net.Listen("unix", sock) })
	if err != nil {
		return nil, socketListenError(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: chmod %s: %w", sock, err)
	}
	srv := adminServer(h)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin socket stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = os.Remove(sock)
	}, nil
}

// socketListenError is a failure to bind the admin socket, with the flag
// that runs without one: a file system that cannot hold a unix socket
// (some network and FUSE mounts) answers bind with ENOSYS and nothing more.
func socketListenError(err error) error {
	const without = "start with --no-socket to run without it (CLI commands then cannot reach this runner while it runs)"
	if errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("admin socket: %w: this file system cannot hold a unix socket; %s, or put the database on another file system", err, without)
	}
	return fmt.Errorf("admin socket: %w; %s", err, without)
}

func sweepLoop(ctx context.Context, c *api.Client, retention, keyRetention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		n, err := c.Sweep(ctx, retention, keyRetention)
		if err != nil && ctx.Err() == nil {
			logger.Error("retention sweep failed", "err", err)
		} else if n > 0 {
			logger.Info("retention sweep", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readTokenFile reads a bearer token (of the TCP admin API, of the
// dashboard) from the file of flag: a file only its owner may read (as
// ssh wants of a key), holding one token of printable ASCII characters
// that admin.CheckToken takes.
func readTokenFile(flag, path string) (string, error) {
	bad := func(why string) error {
		return &api.InvalidError{Field: flag, Value: fmt.Sprintf("%q", path), Accepted: why}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", bad("a readable file holding the token (" + err.Error() + ")")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && unixFileModes {
		return "", bad(fmt.Sprintf("a file only its owner can read (it is mode %04o: chmod 600 %s)", perm, path))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", bad("a readable file holding the token (" + err.Error() + ")")
	}
	token := strings.TrimSpace(string(b))
	for i := 0; i < len(token); i++ {
		if c := token[i]; c < 0x21 || c > 0x7e {
			return "", bad("one token of printable ASCII, no spaces or line breaks inside (an HTTP header cannot carry them)")
		}
	}
	// Refused at start: a weak token would only be found out by guessing.
	if err := admin.CheckToken(token); err != nil {
		why := err.Error()
		if we, ok := errors.AsType[*admin.WeakTokenError](err); ok {
			why = we.Reason
		}
		return "", bad(fmt.Sprintf("a token of at least %d characters, %d of them distinct, with about %d bits of entropy or more (this one has %s); %s",
			admin.MinTokenLen, admin.MinTokenDistinct, admin.MinTokenBits, why, admin.TokenAdvice))
	}
	return token, nil
}

// maxAdminConns bounds the TCP admin API's connections: a client that
// opens many and sends nothing must not take the descriptors the runner's
// own connections need.
const maxAdminConns = 64

// adminServer serves the admin API with time limits on every phase: a
// request's head (10 s), the whole request (2 min, room for a 64 MiB batch),
// and an idle connection (1 min).
func adminServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 2 * time.Minute,
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
}

// limitListener accepts at most n connections at a time; the next waits
// until one closes.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close: an Accept waiting for a slot returns
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		// http.Server.Close closes the listener and waits for Serve to
		// return before it closes the connections that hold the slots.
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// loadTLSFlags builds the TLS configuration of --ca-file, --client-cert and
// --client-key: nil when none is given. A file that cannot be read or holds
// no usable PEM is invalid input naming its flag.
func loadTLSFlags(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, usagef("run: give --client-cert and --client-key together (the certificate and its private key)")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, &api.InvalidError{Field: "ca-file", Value: fmt.Sprintf("%q", caFile), Accepted: "a readable PEM file of CA certificates (" + err.Error() + ")"}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &api.InvalidError{Field: "ca-file", Value: fmt.Sprintf("%q", caFile), Accepted: "a PEM file holding at least one CERTIFICATE block"}
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, &api.InvalidError{Field: "client-cert", Value: fmt.Sprintf("%q and --client-key %q", certFile, keyFile), Accepted: "a PEM certificate and the PEM private key that matches it (" + err.Error() + ")"}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// runSettle is Config.Settle for --settle: 0 means none.
func runSettle(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
