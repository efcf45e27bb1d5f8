package proxy

import "sync/atomic"

// Users are the accounts the proxy accepts and logs in to the backend
// as, replaced whole when the configuration is reloaded: a login reads
// the set of the moment; sessions already logged in go on.
type Users struct {
	m atomic.Pointer[map[string]User]
}

// NewUsers returns the accounts of m (not copied: the caller lets go).
func NewUsers(m map[string]User) *Users {
	u := &Users{}
	u.Set(m)
	return u
}

// Get returns the account name, if there is one.
func (u *Users) Get(name string) (User, bool) {
	a, ok := (*u.m.Load())[name]
	return a, ok
}

// Set replaces the accounts with m (not copied).
func (u *Users) Set(m map[string]User) { u.m.Store(&m) }

// Len is how many accounts there are.
func (u *Users) Len() int { return len(*u.m.Load()) }
