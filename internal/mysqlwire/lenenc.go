package mysqlwire

// Null is what stands in a text-protocol row for a NULL value, where a
// length-encoded string would start.
const Null = 0xfb

// AppendLenEncInt appends v as a length-encoded integer: one byte up to
// 250, else 0xfc, 0xfd or 0xfe and 2, 3 or 8 little-endian bytes.
func AppendLenEncInt(b []byte, v uint64) []byte {
	switch {
	case v <= 250:
		return append(b, byte(v))
	case v <= 0xffff:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v <= 0xffffff:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	return append(b, 0xfe, byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
		byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}

// ReadLenEncInt reads a length-encoded integer at the start of b and the
// bytes it takes. A truncated value, the NULL marker (0xfb) and 0xff (an
// ERR packet's marker, no integer) are ok=false: no caller expects them
// where it reads a number.
func ReadLenEncInt(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch b[0] {
	case Null, 0xff:
		return 0, 0, false
	case 0xfc:
		n = 3
	case 0xfd:
		n = 4
	case 0xfe:
		n = 9
	default:
		return uint64(b[0]), 1, true
	}
	if len(b) < n {
		return 0, 0, false
	}
	for i := n - 1; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, n, true
}

// AppendLenEncString appends s with its length-encoded length in front.
func AppendLenEncString(b []byte, s string) []byte {
	return append(AppendLenEncInt(b, uint64(len(s))), s...)
}

// AppendLenEncBytes appends s with its length-encoded length in front.
func AppendLenEncBytes(b, s []byte) []byte {
	return append(AppendLenEncInt(b, uint64(len(s))), s...)
}

// ReadLenEncString reads a length-encoded string at the start of b: the
// string (a slice of b) and the bytes it takes with its length. A NULL
// (0xfb) or a string longer than what b holds is ok=false.
func ReadLenEncString(b []byte) (s []byte, n int, ok bool) {
	l, w, ok := ReadLenEncInt(b)
	if !ok || uint64(len(b)-w) < l {
		return nil, 0, false
	}
	return b[w : w+int(l)], w + int(l), true
}

// ReadNulString reads the NUL-terminated string at b[pos:] and the
// position after its NUL; ok=false when there is no NUL.
func ReadNulString(b []byte, pos int) (s string, next int, ok bool) {
	for i := pos; i < len(b); i++ {
		if b[i] == 0 {
			return string(b[pos:i]), i + 1, true
		}
	}
	return "", pos, false
}
