package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/ui"
)

// ui serves the dashboard alone: for a Postgres database, which no one
// runner holds, or a bbolt file (directly when no runner holds it, else
// through the runner's socket, which serves it at /ui/ itself too).
func (m *Main) ui(ctx context.Context, args []string) error {
	fs, db := m.flags("ui", "--token-file FILE [--listen ADDR] [--tls-cert FILE --tls-key FILE]")
	listen := fs.String("listen", "127.0.0.1:8080", "TCP address to serve the dashboard on")
	tokenFile := fs.String("token-file", "", "file holding the token to log in with (as --admin-token-file of run)")
	certFile := fs.String("tls-cert", "", "PEM certificate to serve HTTPS with (with --tls-key)")
	keyFile := fs.String("tls-key", "", "PEM private key of --tls-cert")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("ui: unexpected argument %q", fs.Arg(0))
	}
	if *tokenFile == "" {
		return usagef("ui: give --token-file FILE: the dashboard is refused without a token (make one with: openssl rand -hex 32 > FILE; chmod 600 FILE)")
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return &api.InvalidError{Field: "listen", Value: fmt.Sprintf("%q", *listen), Accepted: "HOST:PORT, e.g. 127.0.0.1:8080 (" + err.Error() + ")"}
	}
	if (*certFile == "") != (*keyFile == "") {
		return usagef("ui: give --tls-cert and --tls-key together (the certificate and its private key)")
	}
	var tlsCfg *tls.Config
	if *certFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return &api.InvalidError{Field: "tls-cert", Value: fmt.Sprintf("%q and --tls-key %q", *certFile, *keyFile), Accepted: "a PEM certificate and the PEM private key that matches it (" + err.Error() + ")"}
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	}
	token, err := readTokenFile("token-file", *tokenFile)
	if err != nil {
		return err
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	client, err := m.openService(dbt, false)
	if err != nil {
		return err
	}
	defer client.Close()
	logger := slog.New(slog.NewTextHandler(m.Stderr, nil))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("ui: listen %s: %w", *listen, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	dash := ui.Handler(client, ui.Options{Logger: logger})
	mux := http.NewServeMux()
	mux.Handle(admin.UIPath, dash)
	srv := adminServer(admin.Protect(mux, admin.Options{Token: token, Logger: logger, UI: dash}))
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	logger.Info("dashboard", "url", scheme+"://"+ln.Addr().String()+admin.UIPath, "db", dbt.String())
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && tlsCfg == nil {
		logger.Warn("the dashboard listens beyond loopback over plain HTTP: its token and session cookie cross the network unencrypted; give --tls-cert and --tls-key, put it behind TLS, or bind 127.0.0.1", "addr", ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitListener(ln, maxAdminConns)) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("ui: %w", err)
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return nil
}
