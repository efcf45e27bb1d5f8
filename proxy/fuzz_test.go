package proxy

import (
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// handshakeSample builds a valid HandshakeResponse41 payload.
func handshakeSample(user, db, plugin string, auth []byte) []byte {
	caps := mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH |
		mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | mysql.CLIENT_CONNECT_ATTRS
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45)
	b = append(b, make([]byte, 23)...)
	b = append(b, user...)
	b = append(b, 0)
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(auth)))
	b = append(b, auth...)
	b = append(b, db...)
	b = append(b, 0)
	b = append(b, plugin...)
	b = append(b, 0)
	attrs := mysql.PutLengthEncodedString([]byte("_client_name"))
	attrs = append(attrs, mysql.PutLengthEncodedString([]byte("test"))...)
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(attrs)))
	return append(b, attrs...)
}

func TestParseHandshakeResponse(t *testing.T) {
	p := handshakeSample("app", "shop", "mysql_native_password", []byte("0123456789abcdefghij"))
	r, err := parseHandshakeResponse(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.user != "app" || r.db != "shop" || r.plugin != "mysql_native_password" || string(r.auth) != "0123456789abcdefghij" ||
		r.collation != 45 || r.attrs["_client_name"] != "test" {
		t.Fatalf("parsed %+v", r)
	}
	for i := 0; i < len(p); i++ {
		// Every truncation is either a clean error or a shorter parse.
		_, _ = parseHandshakeResponse(p[:i])
	}
}

func FuzzParseHandshakeResponse(f *testing.F) {
	f.Add(handshakeSample("app", "shop", "caching_sha2_password", []byte("x")))
	f.Add(handshakeSample("", "", "", nil))
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := parseHandshakeResponse(p)
		if err == nil && r == nil {
			t.Fatal("nil response without error")
		}
	})
}

func TestParseKill(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want killStmt
		ok   bool
	}{
		{"KILL 5", killStmt{id: 5}, true},
		{"kill query 1073741825;", killStmt{query: true, id: 1073741825}, true},
		{"KILL CONNECTION 7 ", killStmt{id: 7}, true},
		{"KILL HARD QUERY 9", killStmt{modifier: "HARD", query: true, id: 9}, true},
		{"KILL SOFT 3", killStmt{modifier: "SOFT", id: 3}, true},
		{"KILL QUERY ID 12", killStmt{}, false}, // MariaDB query id, not a thread
		{"KILL USER bob", killStmt{}, false},
		{"KILL CONNECTION_ID()", killStmt{}, false},
		{"KILL", killStmt{}, false},
		{"KILL -1", killStmt{}, false},
	} {
		got, ok := parseKill(tc.sql)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%q: got %+v %v, want %+v %v", tc.sql, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseKill(f *testing.F) {
	f.Add("KILL QUERY 1073741825")
	f.Add("kill hard connection 1")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseKill(s)
		_, _ = parseUse(s)
	})
}

func TestParseUse(t *testing.T) {
	for in, want := range map[string]string{"USE shop": "shop", "use `we``ird`;": "we`ird", " USE  x ": "x"} {
		if got, ok := parseUse(in); !ok || got != want {
			t.Errorf("%q: got %q %v", in, got, ok)
		}
	}
}

func TestGreetingRoundTrip(t *testing.T) {
	salt := newSalt()
	for _, ext := range []uint32{0, relayedMariaDBCaps} {
		p := appendInitialHandshake(nil, "10.11.19-MariaDB", 1<<30+1, salt, serverCaps, ext, 45, mysql.AUTH_NATIVE_PASSWORD)
		g, ok := parseGreeting(p)
		if !ok || g.version != "10.11.19-MariaDB" || g.extCaps != ext {
			t.Errorf("ext %x: parsed %+v %v", ext, g, ok)
		}
	}
	// A client asking for MariaDB capabilities clears CLIENT_MYSQL and puts
	// them at the end of the filler.
	p := handshakeSample("app", "", "", nil)
	binary.LittleEndian.PutUint32(p, binary.LittleEndian.Uint32(p)&^clientMySQL)
	binary.LittleEndian.PutUint32(p[extCapsOffset:], mariadbExtendedMetadata)
	if r, err := parseHandshakeResponse(p); err != nil || r.extCaps != mariadbExtendedMetadata {
		t.Errorf("ext caps %+v %v", r, err)
	}
}

func FuzzParseGreeting(f *testing.F) {
	f.Add(appendInitialHandshake(nil, "8.0.36", 7, newSalt(), serverCaps, 0, 45, mysql.AUTH_CACHING_SHA2_PASSWORD))
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = parseGreeting(p)
		_ = clientExtCaps(p)
	})
}
