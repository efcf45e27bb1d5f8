package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/binlog"
	"tableproxy/internal/testdb"
)

func TestLogBefore(t *testing.T) {
	for _, c := range []struct {
		a, b mysql.Position
		want bool
	}{
		{mysql.Position{Name: "binlog.000012", Pos: 4}, mysql.Position{Name: "binlog.000012", Pos: 5}, true},
		{mysql.Position{Name: "binlog.000012", Pos: 5}, mysql.Position{Name: "binlog.000012", Pos: 5}, false},
		{mysql.Position{Name: "binlog.000012", Pos: 900}, mysql.Position{Name: "binlog.000013", Pos: 4}, true},
		{mysql.Position{Name: "binlog.000013", Pos: 4}, mysql.Position{Name: "binlog.000012", Pos: 900}, false},
		{mysql.Position{Name: "binlog.999999", Pos: 900}, mysql.Position{Name: "binlog.1000000", Pos: 4}, true},
	} {
		if got := logBefore(c.a, c.b); got != c.want {
			t.Errorf("logBefore(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestSnapshotReachesTheLogsEnd: a load's snapshot is taken again until it
// holds everything the binary log held when the load began, so a write
// that the log showed before the load is in the copy.
func TestSnapshotReachesTheLogsEnd(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t, "CREATE TABLE `"+db+"`.t (id INT PRIMARY KEY, v INT)", "INSERT INTO `"+db+"`.t VALUES (1, 0)")
	connect := func() *client.Conn {
		c, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	loader, writer := connect(), connect()
	ctx := context.Background()

	// Against the log's real end, read before the load: the snapshot holds
	// at least that much. (Other packages' tests share the server and
	// commit at any time, so nothing is known of the end after it.)
	end, err := binlog.End(writer)
	if err != nil {
		t.Fatal(err)
	}
	if unchecked, err := startSnapshot(ctx, loader, nil); err != nil || unchecked != "" {
		t.Fatalf("against the log's real end: %v (unchecked: %q)", err, unchecked)
	}
	snap, ok, err := snapshotPosition(loader)
	if err != nil || !ok {
		t.Fatalf("MariaDB reports no snapshot position (ok %v, err %v)", ok, err)
	}
	if _, err := loader.Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if logBefore(snap, end) {
		t.Fatalf("the snapshot's position %s is before the log's end %s read before it", snap, end)
	}

	// A log end that the log has not reached yet stands for a transaction
	// that is in the log but not yet committed by the engine: the snapshot
	// must wait until a commit has moved past it. The end is put at the
	// start of the next log file, which only a rotation reaches: other
	// packages' tests share the server and commit at any time.
	if _, err := writer.Execute("UPDATE t SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	ahead := func(*client.Conn) (mysql.Position, error) {
		return mysql.Position{Name: nextLogName(t, end.Name), Pos: 4}, nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := startSnapshot(ctx, loader, ahead)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the snapshot did not wait for the log's end (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	// The rotation itself commits nothing; the commit after it does.
	if _, err := writer.Execute("FLUSH BINARY LOGS"); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Execute("UPDATE t SET v = 2 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	afterWrite, err := binlog.End(writer)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the snapshot did not start after a commit moved the log past its end")
	}
	at, ok, err := snapshotPosition(loader)
	if err != nil || !ok {
		t.Fatalf("no snapshot position (ok %v, err %v)", ok, err)
	}
	barrier, _ := ahead(nil)
	if logBefore(at, barrier) {
		t.Fatalf("the snapshot started at %s, before the log's end %s", at, barrier)
	}
	// Another test's commit may have ended the wait before this one's
	// second write; a snapshot at or past the log's end read after that
	// write holds it, and any snapshot holds the first.
	r, err := loader.Execute("SELECT v FROM t WHERE id = 1")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := r.GetInt(0, 0)
	if v != 1 && v != 2 || v == 1 && !logBefore(at, afterWrite) {
		t.Errorf("the snapshot at %s (the log ended at %s after the last write) reads v = %d", at, afterWrite, v)
	}
	if _, err := loader.Execute("COMMIT"); err != nil {
		t.Fatal(err)
	}

	// A user who may not read where the log ends still loads, and the
	// load says that it could not check.
	user := b.NewUser(t, "pw", "SELECT", db)
	plain, err := client.Connect(b.Addr, user, "pw", db)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if unchecked, err := startSnapshot(ctx, plain, nil); err != nil || unchecked == "" {
		t.Errorf("without the right to read the log's end: err %v, unchecked %q (want no error, and why it was not checked)", err, unchecked)
	}

	// A log end that no commit reaches: the wait ends with the load's
	// context.
	far := func(*client.Conn) (mysql.Position, error) { return mysql.Position{Name: end.Name + "9", Pos: 4}, nil }
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := startSnapshot(short, loader, far); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a log end no commit reaches: %v, want the context's deadline", err)
	}
}

// nextLogName is the name of the binary log file after name
// (binlog.000019 -> binlog.000020).
func nextLogName(t *testing.T, name string) string {
	t.Helper()
	dot := strings.LastIndexByte(name, '.')
	n, err := strconv.Atoi(name[dot+1:])
	if dot < 0 || err != nil {
		t.Fatalf("binary log file name %q has no number", name)
	}
	return fmt.Sprintf("%s%0*d", name[:dot+1], len(name)-dot-1, n+1)
}
