package main

// Tests of the idemrun CLI against httptest targets on 127.0.0.1, with the
// database in a temporary directory. Most commands run in this process,
// through Main.Run with buffers (env.run, env.ok). The binary TestMain
// builds once runs where a real process matters (env.runProc, startRunner):
// a runner holding the file's lock or its socket while other commands run,
// SIGKILL and signals, the runner's process-wide settings (umask, signal
// handling, the collector), another uid, and the working directory.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemrun/idemrun/internal/pgtest"
)

// binPath is the idemrun binary built once by TestMain; it is set before
// any test runs and never changed.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "idemrun-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "idemrun tests: temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "idemrun")
	build := exec.Command("go", "build", "-o", binPath, "github.com/idemrun/idemrun/cmd/idemrun")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "idemrun tests: building the binary: %v\n", err)
		return 1
	}
	// Postgres for the tests of a postgres:// --db (pgtest.Schema).
	return pgtest.Main(m)
}

// cmdTimeout bounds every CLI command a test runs.
const cmdTimeout = 20 * time.Second

// result is what one CLI process did.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
	took   time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("idemrun %s\n  exit %d after %s\n  stdout: %s\n  stderr: %s",
		strings.Join(quoteArgs(r.args), " "), r.code, r.took.Round(time.Millisecond), clip(r.stdout), clip(r.stderr))
}

// clip shortens long output (a goroutine dump) for a failure message.
func clip(s string) string {
	const max = 12 << 10
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("\n… (%d more bytes)", len(s)-max)
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 80 {
			a = a[:80] + fmt.Sprintf("…(%d bytes)", len(a))
		}
		out[i] = fmt.Sprintf("%q", a)
	}
	return out
}

// env is one test's working directory and database.
type env struct {
	t   *testing.T
	dir string
	db  string
	// schema is IDEMRUN_SCHEMA, for a Postgres db.
	schema string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := shortTempDir(t)
	return &env{t: t, dir: dir, db: filepath.Join(dir, "jobs.db")}
}

// with returns a copy of e that reports to t (for subtests).
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// shortTempDir is t.TempDir, or a shorter directory when the admin socket
// path beside a database in it would not fit a unix socket address.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if len(filepath.Join(dir, "jobs.db.sock")) < 100 {
		return dir
	}
	d, err := os.MkdirTemp("", "idr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// environ is the environment of a CLI command, a child process's or (by
// getenv) one run in this process: the test's own, with no IDEMRUN_
// variables leaking in, plus IDEMRUN_DB for this env (unless e.db is
// empty).
func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "IDEMRUN_") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "IDEMRUN_ACTOR=e2e-test")
	if e.schema != "" {
		out = append(out, "IDEMRUN_SCHEMA="+e.schema)
	}
	if e.db == "" {
		return out
	}
	return append(out, "IDEMRUN_DB="+e.db)
}

// getenv is what a command run in this process reads as its environment:
// the variables environ gives a process.
func (e *env) getenv() func(string) string {
	vars := map[string]string{}
	for _, kv := range e.environ() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return func(k string) string { return vars[k] }
}

// processWide are the commands that, once past their flags, change what is
// the whole process's: the signals it handles (run, demo, bench), its umask
// (run's admin socket) and its collector's settings (run, bench). In this
// process they may only refuse their flags (exit 2); run them with runProc.
var processWide = []string{"run", "demo", "bench"}

// run runs the CLI with args in this process and returns what it did.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runStdin(nil, args...)
}

// runStdin is run with stdin as the command's standard input (none, as
// /dev/null, when nil).
func (e *env) runStdin(stdin []byte, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	var stdout, stderr syncBuffer
	m := &Main{Stdin: bytes.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: e.getenv()}
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		code := exitUsage
		defer func() {
			// As the Go runtime reports a panic that ends a process,
			// so noCrash sees it; the exit code is the runtime's too.
			if p := recover(); p != nil {
				fmt.Fprintf(&stderr, "panic: %v\n\n%s", p, debug.Stack())
			}
			done <- code
		}()
		code = m.Run(ctx, args)
	}()
	var code int
	var stacks string
	select {
	case code = <-done:
	case <-ctx.Done():
		// What SIGQUIT shows of a process: where every goroutine is.
		stacks = allStacks()
		select {
		case code = <-done:
		case <-time.After(3 * time.Second):
			code = -1 // still running: it ignores its context
		}
	}
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String(), code: code, took: time.Since(start)}
	if ctx.Err() != nil {
		e.t.Fatalf("did not finish within %s:\n%s\ngoroutines at the deadline:\n%s", cmdTimeout, r, clip(stacks))
	}
	if len(args) > 0 && slices.Contains(processWide, args[0]) && r.code != exitUsage {
		e.t.Fatalf("idemrun %s ran in the test process past its flags, changing process-wide settings; run it with runProc:\n%s", args[0], r)
	}
	return r
}

// allStacks is every goroutine's stack.
func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// runProc runs the idemrun binary with args as a process in e.dir, and
// returns what it did.
func (e *env) runProc(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	// On timeout, SIGQUIT makes the Go runtime print every goroutine's
	// stack to stderr, which shows where the command hung.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 3 * time.Second
	cmd.Dir = e.dir
	cmd.Env = e.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("idemrun %v: %v", quoteArgs(args), err)
		}
		r.code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		e.t.Fatalf("did not finish within %s:\n%s", cmdTimeout, r)
	}
	return r
}

// okProc is runProc, failing the test unless the process exits 0.
func (e *env) okProc(args ...string) result {
	e.t.Helper()
	r := e.runProc(args...)
	if r.code != 0 {
		e.t.Fatalf("want exit 0, got:\n%s", r)
	}
	return r
}

// ok runs the CLI and fails the test unless it exits 0.
func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("want exit 0, got:\n%s", r)
	}
	return r
}

// jsonObject decodes one JSON object from a command's stdout.
func jsonObject(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not one JSON object (%v):\n%s", err, r)
	}
	return m
}

// jsonArray decodes a JSON array of objects from a command's stdout.
func jsonArray(t *testing.T, r result) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("stdout is not a JSON array of objects (%v):\n%s", err, r)
	}
	return a
}

// allStates are the seven job states of the design.
var allStates = []string{"pending", "running", "unknown", "succeeded", "failed", "needs_attention", "canceled"}

// statsOf runs stats --json and checks it holds exactly the seven states.
func (e *env) statsOf(extra ...string) map[string]int64 {
	e.t.Helper()
	r := e.ok(append([]string{"stats", "--json"}, extra...)...)
	var st map[string]int64
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("stats --json is not an object of counts (%v):\n%s", err, r)
	}
	for _, s := range allStates {
		if _, ok := st[s]; !ok {
			e.t.Errorf("stats --json has no %q: got %v, want all of %v", s, st, allStates)
		}
	}
	if len(st) != len(allStates) {
		e.t.Errorf("stats --json has %d keys: got %v, want exactly %v", len(st), st, allStates)
	}
	return st
}

// showJob runs show --json and returns the job object.
func (e *env) showJob(idOrKey string, extra ...string) map[string]any {
	e.t.Helper()
	return jsonObject(e.t, e.ok(append([]string{"show", idOrKey, "--json"}, extra...)...))
}

// waitState polls show --json until the job is in want, for at most limit.
func (e *env) waitState(id, want string, limit time.Duration) map[string]any {
	e.t.Helper()
	const every = 50 * time.Millisecond
	var last map[string]any
	for i := 0; i < int(limit/every)+1; i++ {
		last = e.showJob(id)
		if last["state"] == want {
			return last
		}
		time.Sleep(every)
	}
	e.t.Fatalf("job %s: got state %v after %s, want %s (last_error %v, reason %v)", id, last["state"], limit, want, last["last_error"], last["reason"])
	return nil
}

// requiredJobFields are --json fields of a job that scripts rely on (docs/cli.md, "JSON output").
var requiredJobFields = []string{"id", "key", "state", "method", "url", "attempts", "created_at", "updated_at", "next_run_at", "last_error", "last_status"}

// checkJobShape asserts a job object has every promised field with its type.
func checkJobShape(t *testing.T, where string, j map[string]any) {
	t.Helper()
	for _, f := range requiredJobFields {
		v, ok := j[f]
		if !ok {
			t.Errorf("%s: field %q missing; got keys %v", where, f, keys(j))
			continue
		}
		switch f {
		case "attempts", "last_status":
			if _, ok := v.(float64); !ok {
				t.Errorf("%s: %s = %#v, want a number", where, f, v)
			}
		case "created_at", "updated_at", "next_run_at":
			s, _ := v.(string)
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				t.Errorf("%s: %s = %#v, want an RFC 3339 time (%v)", where, f, v, err)
			}
		case "last_error":
			if _, ok := v.(string); !ok {
				t.Errorf("%s: %s = %#v, want a string", where, f, v)
			}
		default:
			if s, _ := v.(string); s == "" {
				t.Errorf("%s: %s = %#v, want a non-empty string", where, f, v)
			}
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// seen is one request a target received.
type seen struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// target is an httptest server on 127.0.0.1 that records every request and
// answers with answer. Each request is also sent on hits (never blocking).
type target struct {
	srv  *httptest.Server
	hits chan seen

	mu   sync.Mutex
	reqs []seen
}

func newTarget(t *testing.T, answer http.HandlerFunc) *target {
	t.Helper()
	tg := &target{hits: make(chan seen, 1024)}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 2<<20))
		s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: b}
		tg.mu.Lock()
		tg.reqs = append(tg.reqs, s)
		tg.mu.Unlock()
		select {
		case tg.hits <- s:
		default:
		}
		answer(w, r)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) url(path string) string { return tg.srv.URL + path }

// requests returns the requests received on path.
func (tg *target) requests(path string) []seen {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []seen
	for _, s := range tg.reqs {
		if s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

func (tg *target) total() int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return len(tg.reqs)
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runnerProc is a background `idemrun run` process.
type runnerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdout  *syncBuffer
	logs    *syncBuffer
	started chan struct{} // closed at the "runner started" log line
	exited  chan struct{} // closed once the process has been waited for
	code    int           // exit code, valid after exited is closed
}

// startRunner starts `idemrun run ARGS` and waits until it logs that it
// started (or fails the test if it exits first or takes over 15 s).
func (e *env) startRunner(args ...string) *runnerProc {
	e.t.Helper()
	p := e.spawnRunner(args...)
	select {
	case <-p.started:
	case <-p.exited:
		e.t.Fatalf("idemrun run %v exited with %d before starting:\n%s", args, p.code, p.logs)
	case <-time.After(15 * time.Second):
		e.t.Fatalf("idemrun run %v did not start within 15s:\n%s", args, p.logs)
	}
	return p
}

// spawnRunner starts `idemrun run ARGS` without waiting for it.
func (e *env) spawnRunner(args ...string) *runnerProc {
	e.t.Helper()
	cmd := exec.Command(binPath, append([]string{"run"}, args...)...)
	cmd.Dir = e.dir
	cmd.Env = e.environ()
	p := &runnerProc{t: e.t, cmd: cmd, stdout: &syncBuffer{}, logs: &syncBuffer{}, started: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stdout = p.stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if !once && strings.Contains(line, "runner started") {
				once = true
				close(p.started)
			}
		}
		_, _ = io.Copy(p.logs, pipe)
		err := cmd.Wait()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = -int(ws.Signal())
			}
		}
		close(p.exited)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// stop sends sig and waits (at most 20 s) for the process to exit; it
// returns the exit code, or minus the signal number if a signal ended it.
func (p *runnerProc) stop(sig os.Signal) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to runner: %v", sig, err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("runner did not exit within 20s of %v:\n%s", sig, p.logs)
	}
	return p.code
}

func (p *runnerProc) pid() int { return p.cmd.Process.Pid }

// unixClient is an HTTP client that reaches the admin socket at sock.
func unixClient(sock string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// mustNotContain fails when out holds any of secrets.
func mustNotContain(t *testing.T, where, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s leaks %q:\n%s", where, s, out)
		}
	}
}
