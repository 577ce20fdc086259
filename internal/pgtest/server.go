package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServer: the server binaries are not installed, so no server can be
// started. Tests may skip on it outside CI.
var ErrNoServer = errors.New("the Postgres server binaries (initdb, postgres) are not installed: install them (Debian: apt-get install postgresql), or set " + EnvURL + " to a server's URL")

// Server is a throwaway Postgres server in a temporary directory.
type Server struct {
	// URL reaches the server as its superuser, over TCP on 127.0.0.1,
	// without a password.
	URL string

	dir  string
	bin  string  // the directory of the server binaries
	data string  // the cluster's data directory
	as   *osUser // the user the server runs as; nil: this process's
	port int
	cmd  *exec.Cmd
	log  *os.File
	done chan error
}

// debianBins is where Debian and Ubuntu install each major version's
// server binaries, which are not on PATH there.
const debianBins = "/usr/lib/postgresql/*/bin"

// binDir returns the directory holding initdb and postgres: the one on
// PATH, else the newest Debian layout version.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, exe("postgres"))); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(debianBins)
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, dir := range dirs {
		_, e1 := os.Stat(filepath.Join(dir, exe("initdb")))
		_, e2 := os.Stat(filepath.Join(dir, exe("postgres")))
		if e1 == nil && e2 == nil {
			return dir, nil
		}
	}
	return "", ErrNoServer
}

func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// Start initializes a database cluster in a new temporary directory and
// starts a server on it, listening on a free port of 127.0.0.1 only. As
// root it runs both as the postgres user (initdb refuses root), which
// then owns the directory. Durability against a machine crash is off
// (fsync, full page writes): the data is thrown away. A commit still
// reaches the operating system before it is acknowledged (synchronous
// commit), so a crash of the server itself (Restart) keeps every
// acknowledged commit, as a production server's does. ErrNoServer means
// the binaries are not installed.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	as, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idemrun-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{dir: dir, bin: bin, data: filepath.Join(dir, "data"), as: as}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if as != nil {
		if err := os.Chown(dir, as.uid, as.gid); err != nil {
			return nil, fmt.Errorf("pgtest: chown %s to the postgres user: %w", dir, err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, exe("initdb")), "-D", s.data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir // the caller's directory may be closed to that user
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if err := runAs(initdb, as); err != nil {
		return nil, err
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	s.log, err = os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// Another process may take the free port before the server binds it:
	// then try another.
	for try := 0; ; try++ {
		port, perr := freePort()
		if perr != nil {
			return nil, perr
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = s.launch(ctx, port)
		cancel()
		if err == nil || try == 2 || !strings.Contains(s.logTail(), "could not bind") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// launch starts the server on port and waits until it answers, or ctx
// ends.
func (s *Server) launch(ctx context.Context, port int) error {
	// A deadlock a test makes is broken at once, not after a second.
	cmd := exec.Command(filepath.Join(s.bin, exe("postgres")), "-D", s.data,
		"-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=on", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "deadlock_timeout=50ms", "-c", "log_min_messages=warning")
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := runAs(cmd, s.as); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd = cmd
	s.port = port
	s.done = make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s.waitAnswer(ctx)
}

// waitAnswer waits until the server accepts a connection and answers a
// query, or it exits, or ctx ends.
func (s *Server) waitAnswer(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-s.done:
			s.cmd, s.done = nil, nil
			return fmt.Errorf("pgtest: postgres exited (%v) before it answered:\n%s", err, s.logTail())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.URL)
		if err == nil {
			var one int
			err = conn.QueryRow(cctx, "SELECT 1").Scan(&one)
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres did not answer (%v): %w\n%s", err, ctx.Err(), s.logTail())
		case <-t.C:
		}
	}
}

// Stop stops the server (a fast shutdown: sessions are ended) and removes
// its directory.
func (s *Server) Stop() error {
	var err error
	if s.cmd != nil {
		// An interrupt is a fast shutdown; where there are no signals
		// (Windows) the process is killed.
		if s.cmd.Process.Signal(os.Interrupt) != nil {
			s.cmd.Process.Kill()
		}
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			err = fmt.Errorf("pgtest: postgres did not stop within 30s; killed it:\n%s", s.logTail())
		}
		s.cmd = nil
	}
	if s.log != nil {
		s.log.Close()
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
		err = fmt.Errorf("pgtest: %w", rerr)
	}
	return err
}

// logTail returns the last lines the server logged.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// osUser is the user the server runs as, when it is not this process's.
type osUser struct {
	name     string
	uid, gid int
}

// serverUser returns the postgres user when this process runs as root,
// and nil (run as this process's user) otherwise.
func serverUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, so the server must run as the postgres user (initdb refuses root), and there is none: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: the postgres user has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &osUser{name: u.Username, uid: uid, gid: gid}, nil
}
