package eval

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// FuzzDecodeParams: any COM_STMT_EXECUTE payload a client sends (after
// the command and statement id), with any parameter count and bound
// types, is decoded or refused (false), never a panic; a decoded one has
// one argument per parameter.
func FuzzDecodeParams(f *testing.F) {
	longlong := []byte{mysql.MYSQL_TYPE_LONGLONG, 0}
	str := []byte{mysql.MYSQL_TYPE_VAR_STRING, 0}
	// The new-params-bound flag set, and neither types nor values.
	f.Add([]byte{0, 1, 0, 0, 0, 0, 1}, 1, longlong)
	f.Add([]byte{0, 1, 0, 0, 0, 0, 1}, 1, str)
	f.Add([]byte{0, 1, 0, 0, 0, 0, 1, 8, 0, 42, 0, 0, 0, 0, 0, 0, 0}, 1, longlong)
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 3, 'a', 'b', 'c'}, 1, str)
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0xfc, 0xff}, 1, str) // a length past the end
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0}, 1, longlong)        // NULL
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 1, 2}, 2, append(append([]byte{}, str...), str...))
	f.Fuzz(func(t *testing.T, b []byte, n int, types []byte) {
		if n < 0 || n > 1<<16 {
			return // (the proxy's count comes from the backend's PREPARE answer: at most 65535)
		}
		args, ok := DecodeParams(b, n, types, nil)
		if ok && n > 0 && len(args) != n {
			t.Fatalf("%d parameters decoded as %d", n, len(args))
		}
	})
}
