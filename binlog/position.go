package binlog

import (
	"errors"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Status is where the backend's binary log ends now, and the schemas its
// filters keep in or out of the log (binlog_do_db, binlog_ignore_db).
type Status struct {
	End            mysql.Position
	DoDB, IgnoreDB string
}

// ErrLogOff is the backend answering with no binary log at all.
var ErrLogOff = errors.New("the backend's binary log is off")

// Execer runs a statement on a backend connection (*client.Conn does).
type Execer interface {
	Execute(command string, args ...any) (*mysql.Result, error)
}

// ReadStatus asks the backend where its binary log ends. MySQL 8.4 knows
// the statement only as SHOW BINARY LOG STATUS and refuses the old name
// with a parse error; the new name is tried on that error alone, so that
// any other (a missing privilege) is the one the old name gave.
func ReadStatus(c Execer) (Status, error) {
	r, err := c.Execute("SHOW MASTER STATUS")
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_PARSE_ERROR {
		r, err = c.Execute("SHOW BINARY LOG STATUS")
	}
	if err != nil {
		return Status{}, err
	}
	defer r.Close()
	if r.RowNumber() == 0 {
		return Status{}, ErrLogOff
	}
	var s Status
	s.End.Name = cellString(r, 0)
	pos, _ := r.GetUint(0, 1)
	s.End.Pos = uint32(pos)
	if r.ColumnNumber() >= 4 {
		s.DoDB = cellString(r, 2)
		s.IgnoreDB = cellString(r, 3)
	}
	return s, nil
}

// cellString is the first row's value in column col, copied: go-mysql's
// string points into the result's buffer, which Close hands to the
// connection's next query, so a position kept past Close would come to
// name whatever that query read (a log file "binlog_checks...").
func cellString(r *mysql.Result, col int) string {
	s, _ := r.GetString(0, col)
	return strings.Clone(s)
}

// End is where the backend's binary log ends now.
func End(c Execer) (mysql.Position, error) {
	s, err := ReadStatus(c)
	return s.End, err
}
