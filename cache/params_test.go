package cache

import (
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/cache/eval"
)

func TestDecodeParams(t *testing.T) {
	vals := []int64{2147483647, -2147483648, 45}
	b := []byte{0, 1, 0, 0, 0, 0, 1} // flags, iteration count, NULL bitmap, new-params-bound
	var types []byte
	for range vals {
		types = append(types, mysql.MYSQL_TYPE_LONGLONG, 0)
	}
	b = append(b, types...)
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	args, ok := eval.DecodeParams(b, 3, types, nil)
	if !ok {
		t.Fatal("not decoded")
	}
	for i, v := range vals {
		if args[i].Null || args[i].V.Cmp(eval.SignedNum(v)) != 0 {
			t.Errorf("param %d: got %+v, want %d", i, args[i], v)
		}
	}
}
