package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemrun/idemrun/admin"
	"github.com/idemrun/idemrun/api"
)

// A backup download still running when the server's ReadTimeout passes
// (2 min in adminServer; 1 s here, the rest of adminServer's settings
// unchanged) is not cut off: ReadTimeout bounds reading the request only.
func TestBackupOutlivesReadTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	c, err := api.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 512<<10)
	for i := range 40 {
		rand.Read(body)
		if _, err := c.Enqueue(context.Background(), api.Request{URL: "http://127.0.0.1:9/p", Body: body}, api.EnqueueOptions{Key: fmt.Sprintf("k-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var want countW
	if _, err := c.Backup(context.Background(), &want); err != nil {
		t.Fatal(err)
	}
	fi := struct{ n int64 }{want.n}
	srv := adminServer(admin.Handler(c, admin.Options{}))
	srv.ReadTimeout = time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(limitListener(ln, maxAdminConns))
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/backup")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first, _ := io.ReadFull(resp.Body, make([]byte, 64<<10))
	time.Sleep(1500 * time.Millisecond) // a slow reader (or a big file on a slow disk)
	rest, err := io.Copy(io.Discard, resp.Body)
	got := int64(first) + rest
	t.Logf("file %d bytes; downloaded %d, err %v; CL %d TE %v", fi.n, got, err, resp.ContentLength, resp.TransferEncoding)
	if err != nil || got != fi.n {
		t.Errorf("backup cut off after the server's ReadTimeout: got %d of %d bytes (err %v)", got, fi.n, err)
	}
}

type countW struct{ n int64 }

func (c *countW) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// A client with a wrong token that sends a body sees the 401, not a reset
// connection, whatever the body's size.
func TestWrongTokenWithBodySees401(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	c, err := api.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := adminServer(admin.Handler(c, admin.Options{Token: "0123456789abcdef0123"}))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(limitListener(ln, maxAdminConns))
	defer srv.Close()
	for _, size := range []int{1 << 10, 1 << 20, 8 << 20, 32 << 20} {
		ok, fail := 0, map[string]int{}
		for range 5 {
			req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/jobs:batch", io.LimitReader(zeroR{}, int64(size)))
			req.ContentLength = int64(size)
			req.Header.Set("Authorization", "Bearer wrong-token-wrong-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fail[err.Error()]++
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == 401 {
				ok++
			} else {
				fail[resp.Status]++
			}
		}
		t.Logf("body %d bytes: 401 seen %d/5; otherwise %v", size, ok, fail)
		if ok != 5 {
			t.Errorf("body %d bytes, wrong token: the client saw %v instead of the 401", size, fail)
		}
	}
}

type zeroR struct{}

func (zeroR) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// 64 connections hold every slot, a 65th waits; srv.Close must end Serve.
func TestLimitListenerCloseWhileFull(t *testing.T) {
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(limitListener(ln, maxAdminConns)) }()
	var conns []net.Conn
	for range maxAdminConns + 1 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Logf("dialed at %s", time.Now().Format("15:04:05.000"))
	// the 65th is not served while the others are open
	fmt.Fprint(conns[maxAdminConns], "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	conns[maxAdminConns].SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := conns[maxAdminConns].Read(make([]byte, 10)); n != 0 {
		t.Errorf("65th connection served while 64 are open")
	}
	t0 := time.Now()
	conns[0].Close()
	conns[maxAdminConns].SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := conns[maxAdminConns].Read(make([]byte, 10)); n == 0 {
		t.Errorf("65th connection not served after one closed: %v", err)
	}
	t.Logf("65th served %s after one closed", time.Since(t0))
	t.Logf("closing at %s", time.Now().Format("15:04:05.000"))
	srv.Close()
	t.Logf("closed at %s", time.Now().Format("15:04:05.000"))
	select {
	case err := <-done:
		t.Logf("Serve returned %v", err)
	case <-time.After(3 * time.Second):
		t.Errorf("Serve still blocked 3 s after srv.Close")
	}
}

// srv.Close (run's deferred shutdown of the TCP admin API) while the
// connection cap is reached by authenticated clients holding idle
// keep-alive connections (what http.Transport does by default): Close
// waits for Serve, which must not wait in limitedListener.Accept for a slot
// (only freed when the idle connections time out, 1 min): the listener's
// Close ends that wait at once.
func TestSrvCloseWhenCapReached(t *testing.T) {
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(limitListener(ln, maxAdminConns))
	url := "http://" + ln.Addr().String() + "/"
	var clients []*http.Client
	for range maxAdminConns {
		cl := &http.Client{Transport: &http.Transport{}}
		resp, err := cl.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		clients = append(clients, cl)
	}
	defer func() {
		for _, cl := range clients {
			cl.CloseIdleConnections()
		}
	}()
	closed := make(chan struct{})
	start := time.Now()
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("srv.Close returned after %s", time.Since(start))
		return
	case <-time.After(3 * time.Second):
	}
	select {
	case <-closed:
	case <-time.After(70 * time.Second):
	}
	t.Errorf("srv.Close took %s with %d idle keep-alive connections (want well under a second)", time.Since(start).Round(time.Second), maxAdminConns)
}
