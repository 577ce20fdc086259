package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/idemrun/idemrun/internal/loopback"
	"github.com/idemrun/idemrun/store"
	"github.com/idemrun/idemrun/store/postgres"
	"github.com/idemrun/idemrun/store/storetest"
)

const faultPW = "s3cr3t-Pa55"

// connectFails opens, migrates and pings url and returns the
// *ConnectError each gives, checking that it is one line without the
// password.
func connectFails(t *testing.T, url string) []*postgres.ConnectError {
	t.Helper()
	var out []*postgres.ConnectError
	for name, f := range map[string]func() error{
		"Open":    func() error { _, err := postgres.Open(ctx, url, nil); return err },
		"Migrate": func() error { return postgres.Migrate(ctx, url, nil) },
		"Ping":    func() error { return postgres.Ping(ctx, url) },
	} {
		err := f()
		var ce *postgres.ConnectError
		if !errors.As(err, &ce) {
			t.Fatalf("%s(%s) = %v; want a *ConnectError", name, url, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "\n") || strings.Contains(ce.Err.Error(), "s3cr3t") {
			t.Errorf("%s's error shows the password or is not one line: %q", name, msg)
		}
		out = append(out, ce)
	}
	return out
}

// TestConnectRefused: nothing listening, or a server that never answers
// (connect_timeout), is store.ErrUnavailable.
func TestConnectRefused(t *testing.T) {
	silent := loopback.Serve(t, func(c net.Conn) { <-t.Context().Done() })
	for _, u := range []string{
		"postgres://idemrun:" + faultPW + "@127.0.0.1:1/db?connect_timeout=5&sslmode=disable",
		"postgres://idemrun:" + faultPW + "@" + silent.Addr().String() + "/db?connect_timeout=1&sslmode=disable",
	} {
		for _, ce := range connectFails(t, u) {
			if ce.Problem != store.ErrUnavailable || !errors.Is(ce, store.ErrUnavailable) || errors.Is(ce, postgres.ErrAuth) {
				t.Errorf("connect to %s: Problem %v (%v); want store.ErrUnavailable", u, ce.Problem, ce)
			}
			if !strings.Contains(ce.Error(), "cannot be reached") {
				t.Errorf("message %q; want it to say the server cannot be reached", ce)
			}
		}
	}
}

// TestConnectNoDatabase: a URL naming a database the server lacks is
// ErrNoDatabase, not something to try again.
func TestConnectNoDatabase(t *testing.T) {
	_, u, _ := newStore(t, nil)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Path = "/no_such_database"
	pu.User = url.UserPassword(pu.User.Username(), faultPW)
	for _, ce := range connectFails(t, pu.String()) {
		if ce.Problem != postgres.ErrNoDatabase || errors.Is(ce, store.ErrUnavailable) {
			t.Errorf("Problem %v (%v); want ErrNoDatabase alone", ce.Problem, ce)
		}
	}
}

// TestConnectAuth: a server that refuses the password (SQLSTATE 28P01,
// as a server with password authentication says it) is ErrAuth. The test
// server trusts everyone, so a loopback server speaks the protocol.
func TestConnectAuth(t *testing.T) {
	var gotPW atomic.Bool
	ln := loopback.Serve(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		be := pgproto3.NewBackend(c, c)
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
		be.Send(&pgproto3.AuthenticationCleartextPassword{})
		if be.Flush() != nil {
			return
		}
		if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
			return
		}
		if m, err := be.Receive(); err == nil {
			if pm, ok := m.(*pgproto3.PasswordMessage); ok && pm.Password == faultPW {
				gotPW.Store(true)
			}
		}
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "idemrun"`})
		be.Flush()
	})
	u := "postgres://idemrun:" + faultPW + "@" + ln.Addr().String() + "/db?sslmode=disable&connect_timeout=5"
	for _, ce := range connectFails(t, u) {
		if ce.Problem != postgres.ErrAuth || errors.Is(ce, store.ErrUnavailable) {
			t.Errorf("Problem %v (%v); want ErrAuth alone", ce.Problem, ce)
		}
	}
	if !gotPW.Load() {
		t.Errorf("the loopback server never got the password; the test did not test a refusal of it")
	}
}

// terminator ends backends of the test server from a connection of its
// own.
func terminator(t *testing.T, url string) func(pid uint32) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	var mu sync.Mutex
	return func(pid uint32) {
		mu.Lock()
		defer mu.Unlock()
		var ok bool
		// Waits up to 5 s for the backend to have ended.
		if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, int(pid)).Scan(&ok); err != nil || !ok {
			t.Errorf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
		}
	}
}

// TestCommitLost: the transaction's backend ends just before COMMIT, so
// the client cannot know whether it committed: store.ErrCommitUnknown.
// The write did not commit here, and the same job enqueued again is a
// fresh insert under its key.
func TestCommitLost(t *testing.T) {
	_, u, schema := newStore(t, nil)
	kill := terminator(t, u)
	var armed atomic.Bool
	db := openStore(t, u, &postgres.Options{Schema: schema, BeforeCommit: func(_ context.Context, pid uint32) {
		if armed.CompareAndSwap(true, false) {
			kill(pid)
		}
	}})
	now := storetest.T0()
	j := storetest.NewJob("lost-commit", now)
	armed.Store(true)
	_, err := db.Enqueue(ctx, j)
	if !errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Enqueue whose backend ended before COMMIT = %v; want store.ErrCommitUnknown", err)
	}
	res, err := db.Enqueue(ctx, j)
	if err != nil || res.Existing || res.Job.ID != j.ID {
		t.Fatalf("Enqueue again = %+v, %v; want a fresh insert", res, err)
	}
	if res, err := db.Enqueue(ctx, j); err != nil || !res.Existing {
		t.Errorf("a third Enqueue = %+v, %v; want the job Existing", res, err)
	}

	// A manual change lost alike, then made again.
	cs, err := db.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %v, %v", cs, err)
	}
	armed.Store(true)
	_, _, err = db.FinishClaim(ctx, cs[0], func(j *store.Job) error { j.State = store.StateFailed; return nil }, nil)
	if !errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("FinishClaim whose backend ended before COMMIT = %v; want store.ErrCommitUnknown", err)
	}
	if _, _, err := db.FinishClaim(ctx, cs[0], func(j *store.Job) error { j.State = store.StateFailed; return nil }, nil); err != nil {
		t.Errorf("FinishClaim again = %v", err)
	}
}

// proxy forwards loopback connections to the test server, and can cut
// them: every one at once (down), or the one whose COMMIT the server has
// just acknowledged, before the client reads the acknowledgement.
type proxy struct {
	ln          net.Listener
	down        atomic.Bool
	cutAtCommit atomic.Bool
	mu          sync.Mutex
	conns       map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{conns: map[net.Conn]bool{}}
	p.ln = loopback.Serve(t, func(c net.Conn) {
		if p.down.Load() {
			return
		}
		s, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			return
		}
		defer s.Close()
		p.track(c, s)
		go func() {
			io.Copy(s, c)
			s.Close()
		}()
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if bytes.Contains(buf[:n], []byte("COMMIT\x00")) && p.cutAtCommit.CompareAndSwap(true, false) {
					return // committed on the server; the client never hears it
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return p
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = true
	}
}

// cut closes every connection through the proxy and refuses new ones
// until up.
func (p *proxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) up() { p.down.Store(false) }

// url is the test server's URL through the proxy.
func (p *proxy) url(t *testing.T, server string) string {
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// TestCommitAckLost: the server commits and the connection ends before
// its acknowledgement reaches the client: store.ErrCommitUnknown, and the
// same job enqueued again is the stored one (Existing).
func TestCommitAckLost(t *testing.T) {
	_, u, schema := newStore(t, nil)
	su, _ := url.Parse(u)
	p := newProxy(t, su.Host)
	db := openStore(t, p.url(t, u), &postgres.Options{Schema: schema})
	j := storetest.NewJob("ack-lost", storetest.T0())
	p.cutAtCommit.Store(true)
	_, err := db.Enqueue(ctx, j)
	if !errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("Enqueue whose COMMIT acknowledgement was lost = %v; want store.ErrCommitUnknown", err)
	}
	res, err := db.Enqueue(ctx, j)
	if err != nil || !res.Existing || res.Job.ID != j.ID {
		t.Fatalf("Enqueue again = %+v, %v; want the committed job, Existing", res, err)
	}
}

// TestUnavailable: with the server out of reach every operation fails
// with store.ErrUnavailable; once it is back they succeed, with every
// write acknowledged before still there. Ending the server's backends
// alike loses nothing: the pool reconnects.
func TestUnavailable(t *testing.T) {
	_, u, schema := newStore(t, nil)
	su, _ := url.Parse(u)
	p := newProxy(t, su.Host)
	db := openStore(t, p.url(t, u), &postgres.Options{Schema: schema, MaxConns: 2})
	now := storetest.T0()
	var acked []string
	enqueue := func(key string) error {
		res, err := db.Enqueue(ctx, storetest.NewJob(key, now))
		if err == nil {
			acked = append(acked, res.Job.ID)
		}
		return err
	}
	for i := range 5 {
		if err := enqueue(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	p.cut()
	if err := enqueue("while-down"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Enqueue while the server is out of reach = %v; want store.ErrUnavailable", err)
	}
	if _, err := db.Stats(); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Stats while the server is out of reach = %v; want store.ErrUnavailable", err)
	}
	if err := db.Heartbeat(ctx, "r", now, time.Minute); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Heartbeat while the server is out of reach = %v; want store.ErrUnavailable", err)
	}
	p.up()
	for i := range 5 {
		if err := enqueue(fmt.Sprintf("after-%d", i)); err != nil {
			t.Fatalf("Enqueue once the server is back: %v", err)
		}
	}

	// The server ends every backend of the handle's pool.
	kill := terminator(t, u)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'idemrun' AND pid <> pg_backend_pid() AND client_port = ANY($1)`, proxiedPorts(p))
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		t.Fatalf("backends of the handle: %v, %v", pids, err)
	}
	for _, pid := range pids {
		kill(uint32(pid))
	}
	for i := range 5 {
		err := enqueue(fmt.Sprintf("reborn-%d", i))
		for try := 0; err != nil && try < 3; try++ {
			if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrCommitUnknown) {
				t.Fatalf("Enqueue after the backends ended = %v; want success, or ErrUnavailable", err)
			}
			err = enqueue(fmt.Sprintf("reborn-%d", i))
		}
		if err != nil {
			t.Fatalf("Enqueue after the backends ended, tried again: %v", err)
		}
	}
	for _, id := range acked {
		if _, err := db.Get(id); err != nil {
			t.Errorf("acknowledged job %s: %v", id, err)
		}
	}
	if st, err := db.Stats(); err != nil || st[store.StatePending] != int64(len(acked)) {
		t.Errorf("Stats = %v, %v; want the %d acknowledged jobs pending", st, err, len(acked))
	}
}

// proxiedPorts returns the local ports of the proxy's connections to the
// server: the client ports the server sees.
func proxiedPorts(p *proxy) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int32
	for c := range p.conns {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok && a.Port != p.ln.Addr().(*net.TCPAddr).Port {
			out = append(out, int32(a.Port))
		}
	}
	return out
}

// TestConnectUnencodedAt: a URL with a second @ before its host (a
// password with an @ left unencoded) is refused before any connection,
// naming the fix, without any part of the password.
func TestConnectUnencodedAt(t *testing.T) {
	hit := make(chan struct{}, 1)
	ln := loopback.Serve(t, func(c net.Conn) {
		select {
		case hit <- struct{}{}:
		default:
		}
	})
	u := "postgres://idemrun:s3cr@t3-Pa55@" + ln.Addr().String() + "/db?sslmode=disable&connect_timeout=2"
	for name, f := range map[string]func() error{
		"Open":    func() error { _, err := postgres.Open(ctx, u, nil); return err },
		"Migrate": func() error { return postgres.Migrate(ctx, u, nil) },
		"Ping":    func() error { return postgres.Ping(ctx, u) },
	} {
		err := f()
		if err == nil {
			t.Fatalf("%s(%s) = nil; want the URL refused", name, u)
		}
		msg := err.Error()
		if strings.Contains(msg, "s3cr") || strings.Contains(msg, "t3-Pa55") || !strings.Contains(msg, "%40") {
			t.Errorf("%s: %q; want it to name %%40 and no part of the password", name, msg)
		}
	}
	select {
	case <-hit:
		t.Errorf("a refused URL still connected")
	default:
	}
}
