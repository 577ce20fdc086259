package api

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A backup client that stops reading (a suspended `idemrun backup`, a
// stalled pipe) must not keep the backup's read transaction open for as
// long as it likes: bbolt cannot remap a file that must grow while a read
// transaction is open, so every write that needs more room would hang, the
// runner's included. The backup is abandoned after backupStall.
func TestStalledBackupDoesNotBlockWrites(t *testing.T) {
	old := backupStall
	backupStall = time.Second
	defer func() { backupStall = old }()
	path := filepath.Join(t.TempDir(), "b.db")
	c, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 1<<20-1024)
	enq := func(i int) error {
		for k := range body {
			body[k] = byte('a' + (i+k)%26)
		}
		_, err := c.Enqueue(context.Background(), Request{Method: "POST", URL: "http://127.0.0.1:1/x", Body: body}, EnqueueOptions{Key: fmt.Sprintf("k-%d", i)})
		return err
	}
	for i := 0; i < 12; i++ {
		if err := enq(i); err != nil {
			t.Fatal(err)
		}
	}
	fi, _ := os.Stat(path)
	t.Logf("database: %d bytes", fi.Size())

	srv := httptest.NewServer(AdminHandler(c, AdminOptions{}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/backup HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 1024)
	if _, err := conn.Read(buf); err != nil { // the backup has started
		t.Fatal(err)
	}
	// ... and the client now stops reading.

	done := make(chan error, 1)
	go func() {
		for i := 12; i < 40; i++ {
			if err := enq(i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		fi, _ := os.Stat(path)
		t.Errorf("enqueues hung for 10s while a backup client stopped reading (file %d bytes)", fi.Size())
		conn.Close()
		<-done
	}
}
