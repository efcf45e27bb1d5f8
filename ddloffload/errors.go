package ddloffload

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// The errors a client sees are the ones MySQL gives for the same statement
// (numbers and SQLSTATEs from MySQL's errmsg); the job's own failures that
// MySQL has no number for are 1105 (unknown error) with a message.

func errNoSuchTable(schema, table string) *mysql.MyError {
	return mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", schema, table))
}

func errDupKeyName(name string) *mysql.MyError {
	return mysql.NewError(mysql.ER_DUP_KEYNAME, fmt.Sprintf("Duplicate key name '%s'", name))
}

func errKeyColumn(col string) *mysql.MyError {
	return mysql.NewError(mysql.ER_KEY_COLUMN_DOES_NOT_EXITS, fmt.Sprintf("Key column '%s' doesn't exist in table", col))
}

func errWrongIndexName(name string) *mysql.MyError {
	return mysql.NewError(mysql.ER_WRONG_NAME_FOR_INDEX, fmt.Sprintf("Incorrect index name '%s'", name))
}

// errNoKey is MySQL's error for a table without a primary key where one is
// needed (as with sql_require_primary_key).
func errNoKey(schema, table string) *mysql.MyError {
	return mysql.NewError(mysql.ER_REQUIRES_PRIMARY_KEY, fmt.Sprintf(
		"This table type requires a primary key (tableproxy adds indexes online only to tables with a primary key or a NOT NULL unique key; '%s.%s' has neither)", schema, table))
}

func errUnsupported(what string) *mysql.MyError {
	return mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, "tableproxy online ADD INDEX: "+what)
}

func errJob(format string, args ...any) *mysql.MyError {
	return mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy online ADD INDEX: "+fmt.Sprintf(format, args...))
}

// swapRefusal is a reason the backfill strategy (shadow, copy, swap)
// cannot carry a table that the backend's own online build can: under the
// auto strategy it chooses the native one instead (see strategy.go); asked
// for backfill explicitly, the client gets the error.
type swapRefusal struct {
	why string         // what keeps the swap from carrying the table
	err *mysql.MyError // what the client gets when it asked for backfill
}

// cannotSwap is the refusal for why, with the error a client that asked
// for backfill gets: errFor(why and what to do instead).
func cannotSwap(why string, errFor func(string) *mysql.MyError) error {
	return &swapRefusal{why, errFor(why + "; the native strategy (tableproxy_ddl_strategy = native, or auto, the default) has the backend build the index online")}
}

func (e *swapRefusal) Error() string { return e.err.Error() }
func (e *swapRefusal) Unwrap() error { return e.err }

// clientError turns whatever ended a job into the error its client gets: the
// backend's own error when there is one (1062 from the index build, 1142
// for a missing privilege, ...), else 1105 with the message.
func clientError(err error) *mysql.MyError {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me
	}
	return errJob("%v", err)
}
