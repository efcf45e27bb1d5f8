// Package proxy owns the MySQL-protocol front end of tableproxy: the
// listener, the handshake and authentication, one session per client bound
// to one backend connection, statement routing through the plugin chain,
// and the relay of backend responses.
//
// A statement's path, top down: Server.Serve accepts; session.login
// authenticates and binds a backend connection; session.run reads commands;
// session.dispatch routes each; statements go through the plugin chain
// (runStatement), and unless a plugin answers or refuses them, are
// forwarded and their responses relayed packet by packet (relay.go).
//
// What can go wrong: the backend can vanish mid-response (the client's
// connection is closed, as the backend would have closed a direct one, since
// its session state is gone);
// a client can send garbage or vanish mid-result (only that session ends);
// and a relay that loses count of packets would desynchronise both sides,
// which is why the relay follows the protocol's framing exactly.
//
// It imports plugins (the chain's API, which it drives) and
// internal/mysqlwire, and no plugin implementation: the cache, the DDL
// jobs, the lease manager and the cluster reach a session only through
// the plugin chain it is given.
package proxy
