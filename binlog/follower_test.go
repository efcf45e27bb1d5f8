package binlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/internal/testdb"
)

// testBackend logs in to a real backend as its users, as the proxy's
// connector does.
type testBackend struct {
	addr      string
	passwords map[string]string
	flavor    string
}

func (b *testBackend) Connect(ctx context.Context, user, db string) (*client.Conn, error) {
	var d net.Dialer
	return client.ConnectWithDialer(ctx, "tcp", b.addr, user, b.passwords[user], db, d.DialContext)
}

func (b *testBackend) Binlog(user string, cfg replication.BinlogSyncerConfig) (*replication.BinlogSyncer, error) {
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	cfg.Flavor, cfg.Host, cfg.Port, cfg.User, cfg.Password = b.flavor, host, uint16(p), user, b.passwords[user]
	return replication.NewBinlogSyncer(cfg), nil
}

// fixture is a database with table t (id, v), a user who may follow the
// log, and a follower reading as that user.
type fixture struct {
	b      testdb.Backend
	db     string
	user   string
	root   *sql.DB
	f      *Follower
	direct *testBackend
}

func newFixture(t *testing.T, b testdb.Backend) *fixture {
	t.Helper()
	fx := &fixture{b: b, db: b.NewDatabase(t), root: b.Root(t)}
	fx.user = b.NewUser(t, "pw", "ALL", fx.db)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", fx.user, host))
	}
	b.Exec(t, "CREATE TABLE `"+fx.db+"`.t (id INT PRIMARY KEY, v VARCHAR(20))",
		"CREATE TABLE `"+fx.db+"`.u (id INT PRIMARY KEY)")
	var version string
	if err := fx.root.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	flavor := mysql.MySQLFlavor
	if strings.Contains(version, "MariaDB") {
		flavor = mysql.MariaDBFlavor
	}
	fx.direct = &testBackend{addr: b.Addr, passwords: map[string]string{fx.user: "pw"}, flavor: flavor}
	fx.f = New(fx.direct, fx.user, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(fx.f.Close)
	return fx
}

func (fx *fixture) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := fx.root.Exec(strings.ReplaceAll(q, "DB.", "`"+fx.db+"`.")); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// connect opens a connection to the backend as the fixture's user.
func (fx *fixture) connect(t *testing.T) *client.Conn {
	t.Helper()
	c, err := fx.direct.Connect(context.Background(), fx.user, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// end is where the log ends now.
func (fx *fixture) end(t *testing.T) mysql.Position {
	t.Helper()
	c := fx.connect(t)
	defer c.Close()
	pos, err := End(c)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// recorder is a subscriber that keeps what it was given.
type recorder struct {
	fx *fixture

	mu        sync.Mutex
	started   []mysql.Position
	ids       []string // the id of every row image of t, in order
	others    int      // rows events of other tables
	undecoded int      // rows events of t without row images
	last      mysql.Position
	back      int // positions that went backwards
	broken    []error
	failOn    string // Event fails at the row with this id
}

func (r *recorder) subscriber(from mysql.Position, resume bool) Subscriber {
	return Subscriber{From: from, Resume: resume, RowsOf: []Table{{r.fx.db, "t"}},
		Started: func(at mysql.Position) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.started = append(r.started, at)
			r.last = at
		},
		Event: func(ev *replication.BinlogEvent, at mysql.Position) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if at.Compare(r.last) < 0 {
				r.back++
			}
			r.last = at
			e, ok := ev.Event.(*replication.RowsEvent)
			if !ok || string(e.Table.Schema) != r.fx.db {
				return nil
			}
			if string(e.Table.Table) != "t" {
				r.others++
				return nil
			}
			if len(e.Rows) == 0 {
				r.undecoded++
			}
			for _, row := range e.Rows {
				id := fmt.Sprint(row[0])
				if id == r.failOn {
					return errors.New("refused")
				}
				r.ids = append(r.ids, id)
			}
			return nil
		},
		Broken: func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.broken = append(r.broken, err)
		},
	}
}

func (r *recorder) state() (started int, ids string, broken int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started), strings.Join(r.ids, ","), len(r.broken)
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *recorder) waitStarted(t *testing.T, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("start #%d", n), func() bool { s, _, _ := r.state(); return s >= n })
}

func (r *recorder) waitIDs(t *testing.T, want string) {
	t.Helper()
	waitUntil(t, "rows "+want, func() bool { _, ids, _ := r.state(); return ids == want })
}

// A subscriber from now gets the rows written after it started, with the
// row images of the tables it named, in order; the backend serves one
// stream, which ends when the subscription does.
func TestSubscribeAndClose(t *testing.T) {
	fx := newFixture(t, testdb.Get(t))
	fx.exec(t, "INSERT INTO DB.t VALUES (100, 'before')")
	r := &recorder{fx: fx}
	sub := fx.f.Subscribe(r.subscriber(mysql.Position{}, false))
	r.waitStarted(t, 1)
	if n := testdb.BinlogDumps(t, fx.root, fx.user); n != 1 {
		t.Errorf("%d binary log dump threads, want 1", n)
	}
	fx.exec(t, "INSERT INTO DB.t VALUES (1, 'a'), (2, 'b')")
	fx.exec(t, "INSERT INTO DB.u VALUES (1)")
	fx.exec(t, "UPDATE DB.t SET v = 'c' WHERE id = 2")
	r.waitIDs(t, "1,2,2,2") // (an update has its before and after image)
	waitUntil(t, "the other table's event", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.others == 1 })
	sub.Close()
	fx.exec(t, "INSERT INTO DB.t VALUES (3, 'd')")
	waitUntil(t, "the dump thread to end", func() bool { return testdb.BinlogDumps(t, fx.root, fx.user) == 0 })
	_, ids, broken := r.state()
	r.mu.Lock()
	undecoded, back := r.undecoded, r.back
	r.mu.Unlock()
	if ids != "1,2,2,2" || broken != 0 || undecoded != 0 || back != 0 {
		t.Errorf("after Close: rows %s, %d breaks, %d rows events without images, %d positions backwards", ids, broken, undecoded, back)
	}

	// A new subscriber opens the stream again.
	r2 := &recorder{fx: fx}
	sub2 := fx.f.Subscribe(r2.subscriber(mysql.Position{}, false))
	defer sub2.Close()
	r2.waitStarted(t, 1)
	fx.exec(t, "INSERT INTO DB.t VALUES (4, 'e')")
	r2.waitIDs(t, "4")
}

// Subscribers from different positions share one stream: one that needs
// an older position than the stream has read has it started again from
// there, and the subscriber already past it gets nothing twice.
func TestSubscribersFromDifferentPositions(t *testing.T) {
	fx := newFixture(t, testdb.Get(t))
	a := &recorder{fx: fx}
	subA := fx.f.Subscribe(a.subscriber(mysql.Position{}, false))
	defer subA.Close()
	a.waitStarted(t, 1)
	p0 := fx.end(t)
	fx.exec(t, "INSERT INTO DB.t VALUES (1, 'a')")
	fx.exec(t, "INSERT INTO DB.t VALUES (2, 'b')")
	p2 := fx.end(t)
	fx.exec(t, "INSERT INTO DB.t VALUES (3, 'c')")
	a.waitIDs(t, "1,2,3")

	b := &recorder{fx: fx}
	subB := fx.f.Subscribe(b.subscriber(p0, false))
	defer subB.Close()
	b.waitIDs(t, "1,2,3")
	c := &recorder{fx: fx}
	subC := fx.f.Subscribe(c.subscriber(p2, false))
	c.waitIDs(t, "3")
	if _, ids, _ := a.state(); ids != "1,2,3" {
		t.Errorf("the first subscriber, after the stream started again twice: rows %s, want 1,2,3", ids)
	}
	if n := testdb.BinlogDumps(t, fx.root, fx.user); n != 1 {
		t.Errorf("%d binary log dump threads for three subscribers, want 1", n)
	}

	fx.exec(t, "INSERT INTO DB.t VALUES (4, 'd')")
	a.waitIDs(t, "1,2,3,4")
	b.waitIDs(t, "1,2,3,4")
	c.waitIDs(t, "3,4")
	subC.Close()
	fx.exec(t, "INSERT INTO DB.t VALUES (5, 'e')")
	a.waitIDs(t, "1,2,3,4,5")
	b.waitIDs(t, "1,2,3,4,5")
	for name, r := range map[string]*recorder{"a": a, "b": b, "c": c} {
		r.mu.Lock()
		if len(r.started) != 1 || len(r.broken) != 0 || r.back != 0 {
			t.Errorf("%s: started %v, broken %v, %d positions backwards", name, r.started, r.broken, r.back)
		}
		r.mu.Unlock()
	}
	if b.started[0] != p0 || c.started[0] != p2 {
		t.Errorf("started at %v and %v, want %v and %v", b.started[0], c.started[0], p0, p2)
	}
}

// An error from a subscriber's Event ends its subscription alone.
func TestEventErrorEndsTheSubscription(t *testing.T) {
	fx := newFixture(t, testdb.Get(t))
	a, b := &recorder{fx: fx}, &recorder{fx: fx, failOn: "2"}
	subA := fx.f.Subscribe(a.subscriber(mysql.Position{}, true))
	defer subA.Close()
	subB := fx.f.Subscribe(b.subscriber(mysql.Position{}, true))
	defer subB.Close()
	a.waitStarted(t, 1)
	b.waitStarted(t, 1)
	for i := 1; i <= 3; i++ {
		fx.exec(t, fmt.Sprintf("INSERT INTO DB.t VALUES (%d, 'x')", i))
	}
	a.waitIDs(t, "1,2,3")
	if _, ids, broken := b.state(); ids != "1" || broken != 1 {
		t.Errorf("the failing subscriber: rows %s, %d breaks; want 1, one", ids, broken)
	}
}

// A subscriber of a purged (or never written) log file is told; one that
// is past that point goes on.
func TestOlderPositionThatIsGone(t *testing.T) {
	fx := newFixture(t, testdb.Get(t))
	a := &recorder{fx: fx}
	subA := fx.f.Subscribe(a.subscriber(mysql.Position{}, true))
	defer subA.Close()
	a.waitStarted(t, 1)
	end := fx.end(t)
	gone := &recorder{fx: fx}
	subGone := fx.f.Subscribe(gone.subscriber(mysql.Position{Name: strings.TrimRight(end.Name, "0123456789") + "000000", Pos: 4}, false))
	defer subGone.Close()
	waitUntil(t, "the break", func() bool { _, _, broken := gone.state(); return broken == 1 })
	fx.exec(t, "INSERT INTO DB.t VALUES (1, 'x')")
	a.waitIDs(t, "1")
	if started, _, broken := a.state(); started != 1 || broken != 0 {
		t.Errorf("the subscriber past it: started %d times, %d breaks", started, broken)
	}
}

// The backend stops and starts again: every subscriber is told; one that
// resumes follows again from the log's end, one that does not ends.
func TestBackendRestart(t *testing.T) {
	testdb.Get(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	m := testdb.StartPrivate(t, port, "")
	fx := newFixture(t, m.Backend())
	resumes, ends := &recorder{fx: fx}, &recorder{fx: fx}
	subR := fx.f.Subscribe(resumes.subscriber(mysql.Position{}, true))
	defer subR.Close()
	subE := fx.f.Subscribe(ends.subscriber(mysql.Position{}, false))
	defer subE.Close()
	resumes.waitStarted(t, 1)
	ends.waitStarted(t, 1)
	fx.exec(t, "INSERT INTO DB.t VALUES (1, 'x')")
	resumes.waitIDs(t, "1")
	ends.waitIDs(t, "1")

	m.Script(t, "stop")
	waitUntil(t, "both to be told", func() bool {
		_, _, b1 := resumes.state()
		_, _, b2 := ends.state()
		return b1 >= 1 && b2 == 1
	})
	m.Script(t, "start")
	fx.root = m.Backend().Root(t)
	resumes.waitStarted(t, 2)
	fx.exec(t, "INSERT INTO DB.t VALUES (2, 'y')")
	resumes.waitIDs(t, "1,2")
	if started, ids, broken := ends.state(); started != 1 || ids != "1" || broken != 1 {
		t.Errorf("the subscriber that does not resume: started %d times, rows %s, %d breaks", started, ids, broken)
	}
	if n := testdb.BinlogDumps(t, fx.root, fx.user); n != 1 {
		t.Errorf("%d binary log dump threads after the restart, want 1", n)
	}
}

// A position read from the backend keeps its file name after the
// connection runs its next query, which reuses the result's buffer.
func TestEndOutlivesTheNextQuery(t *testing.T) {
	fx := newFixture(t, testdb.Get(t))
	c := fx.connect(t)
	defer c.Close()
	pos, err := End(c)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Clone(pos.Name)
	for i := 0; i < 20; i++ {
		// A row no longer than the one it may reuse the buffer of.
		if _, err := c.Execute("SELECT 'zzzzzzzzzzzzz'"); err != nil {
			t.Fatal(err)
		}
	}
	if pos.Name != name {
		t.Fatalf("the log file's name changed from %q to %q after the next queries", name, pos.Name)
	}
}
