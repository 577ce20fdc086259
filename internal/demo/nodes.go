package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemrun/idemrun/api"
	"github.com/idemrun/idemrun/internal/faketarget"
	"github.com/idemrun/idemrun/store"
)

// nodes supervises the runner processes that share a Postgres database.
// Only the goroutine that made it calls its methods.
type nodes struct {
	cfg    Config
	schema string
	sum    *Summary
	prog   *progress
	logMu  sync.Mutex // one line at a time into cfg.RunnerLog
	list   []*node
	pids   map[int]int // every process started → its node
}

// node is one runner slot: the process now in it, started again after a
// kill or an exit.
type node struct {
	id      int
	cmd     *exec.Cmd // nil while none runs
	exited  chan error
	started time.Time
	log     *nodeLog
}

func newNodes(cfg Config, schema string, sum *Summary, prog *progress) *nodes {
	ns := &nodes{cfg: cfg, schema: schema, sum: sum, prog: prog, pids: map[int]int{}}
	for i := range cfg.Nodes {
		ns.list = append(ns.list, &node{id: i + 1, log: &nodeLog{prefix: fmt.Sprintf("node%d: ", i+1), out: cfg.RunnerLog, mu: &ns.logMu}})
	}
	return ns
}

// start starts every node.
func (ns *nodes) start() error {
	for _, n := range ns.list {
		if err := ns.launch(n); err != nil {
			return err
		}
	}
	return nil
}

func (ns *nodes) launch(n *node) error {
	args := append([]string{"run", "--db", ns.cfg.NodeDB, "--schema", ns.schema, "--lease-ttl", ns.cfg.LeaseTTL.String()}, ns.cfg.runnerArgs()...)
	cmd := exec.Command(ns.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("demo: start node %d: %w", n.id, err)
	}
	n.cmd, n.started = cmd, time.Now()
	ns.pids[cmd.Process.Pid] = n.id
	n.exited = make(chan error, 1)
	go func() { n.exited <- cmd.Wait() }()
	ns.sum.Starts++
	return nil
}

// maxNodeExits bounds how often nodes may exit by themselves before the
// run gives up: a node that cannot run at all must not be restarted until
// the timeout.
func (ns *nodes) maxNodeExits() int { return 3*ns.cfg.Nodes + ns.cfg.Kills + 10 }

// tend starts again every node that exited by itself, and records why.
func (ns *nodes) tend() error {
	for _, n := range ns.list {
		if n.cmd == nil {
			continue
		}
		select {
		case err := <-n.exited:
			n.cmd = nil
			ns.sum.NodeExits = append(ns.sum.NodeExits, fmt.Sprintf("node %d exited by itself (%v) after %s: %s",
				n.id, exitText(err), time.Since(n.started).Round(time.Millisecond), n.log.last()))
			ns.prog.note(fmt.Sprintf("node %d exited by itself (%v); starting it again", n.id, exitText(err)))
			if len(ns.sum.NodeExits) > ns.maxNodeExits() {
				return fmt.Errorf("demo: nodes exited by themselves %d times; the last: %s", len(ns.sum.NodeExits), ns.sum.NodeExits[len(ns.sum.NodeExits)-1])
			}
			if err := ns.launch(n); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// sleep waits d while tending the nodes.
func (ns *nodes) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := ns.tend(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ns.gaveUp(ctx)
		case <-t.C:
		}
	}
	return ns.tend()
}

func (ns *nodes) gaveUp(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("demo: gave up after %s: %w", ns.cfg.Timeout, context.Cause(ctx))
	}
	return fmt.Errorf("demo: stopped: %w", context.Cause(ctx))
}

// killOne kills node i (0-based) with SIGKILL and starts it again.
func (ns *nodes) killOne(ctx context.Context, i int) error {
	if err := ns.tend(); err != nil {
		return err
	}
	n := ns.list[i]
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("demo: node %d did not end within 10s of SIGKILL", n.id)
	case <-ctx.Done():
		return ns.gaveUp(ctx)
	}
	n.cmd = nil
	ns.prog.note(fmt.Sprintf("node %d killed with SIGKILL; starting it again", n.id))
	return ns.launch(n)
}

// waitEnded tends the nodes until total jobs have ended (succeeded,
// failed, canceled or needs_attention).
func (ns *nodes) waitEnded(ctx context.Context, c *api.Client, target *faketarget.Server, total int) error {
	var last api.Stats
	for {
		if err := ns.tend(); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Stats(sctx)
		cancel()
		if err == nil {
			last = st
			if ended(st) >= int64(total) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ns.gaveUp(ctx)
			}
			return fmt.Errorf("%w; jobs by state then: %v%s", ns.gaveUp(ctx), last, ns.notEnded(c, target))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notEnded describes a few jobs that have not ended, for a run that
// gave up on them: their history and owner, what the target received
// under their keys, and the leases with the node of each.
func (ns *nodes) notEnded(c *api.Client, target *faketarget.Server) string {
	var b strings.Builder
	leases, err := c.Store().Leases()
	fmt.Fprintf(&b, "\nleases now (%v):", err)
	for _, l := range leases {
		fmt.Fprintf(&b, "\n  %s: node %d (pid %d), expires %s", l.ID, ns.pids[l.PID], l.PID, l.Expires.Format("15:04:05.000"))
	}
	for _, s := range []store.State{store.StateRunning, store.StatePending, store.StateUnknown} {
		page, err := c.Store().List(store.ListFilter{States: []store.State{s}, Limit: 5})
		if err != nil {
			fmt.Fprintf(&b, "\nlist %s: %v", s, err)
			continue
		}
		for _, j := range page.Jobs {
			fmt.Fprintf(&b, "\n%s", strings.Join(evidence(j, target.Payments(j.Key)), "\n  "))
			fmt.Fprintf(&b, "\n  the target received %d request(s) under this key", len(target.BodiesByKey(j.Key)))
		}
	}
	return b.String()
}

func ended(st api.Stats) int64 {
	return st["succeeded"] + st["failed"] + st["canceled"] + st["needs_attention"]
}

// stop stops every node with SIGTERM (SIGKILL for one that outlasts its
// shutdown grace by far). Calling it again does nothing.
func (ns *nodes) stop() error {
	for _, n := range ns.list {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	var slow []string
	for _, n := range ns.list {
		if n.cmd == nil {
			continue
		}
		select {
		case err := <-n.exited:
			if err != nil {
				ns.sum.NodeExits = append(ns.sum.NodeExits, fmt.Sprintf("node %d exited %v on SIGTERM: %s", n.id, exitText(err), n.log.last()))
			}
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
			slow = append(slow, fmt.Sprint(n.id))
		}
		n.cmd = nil
	}
	if len(slow) > 0 {
		return fmt.Errorf("demo: node(s) %s did not stop within 10s of SIGTERM; killed", strings.Join(slow, ", "))
	}
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// nodeLog writes a node's output to the run's log, each line prefixed
// with the node, and keeps its last line for reports.
type nodeLog struct {
	prefix string
	out    io.Writer
	mu     *sync.Mutex // shared by every node's log
	buf    []byte      // a line not yet ended
	tail   string
}

func (l *nodeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		if len(bytes.TrimSpace(line)) > 0 {
			l.tail = string(line)
		}
		_, _ = fmt.Fprintf(l.out, "%s%s\n", l.prefix, line)
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a line without end: pass it on in parts
		_, _ = fmt.Fprintf(l.out, "%s%s\n", l.prefix, l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *nodeLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tail == "" {
		return "(no output)"
	}
	return l.tail
}
