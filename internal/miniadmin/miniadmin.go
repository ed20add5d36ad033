// Package miniadmin gives a miniredis server the CLIENT subcommands a
// fleet's driver uses to sever dropped members' connections (CLIENT LIST,
// with each connection's id and name, and CLIENT KILL ID), which miniredis
// does not have, and CLIENT ID. It is for tests and embedded demos only;
// users reach it through the public package redshardtest, which wraps it.
// It stays here, with no dependency but miniredis, so that the root's own
// tests and packages below it can use it too.
//
// A killed connection behaves as on Redis for its owner: the next command
// it sends is not executed and the connection closes, so the client sees
// the connection fail (Redis closes it at once; a client learns of it on
// its next use either way).
package miniadmin

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// Admin is the CLIENT state of one miniredis: its connections' ids and
// names. It is miniredis's server pre-hook, which miniredis forgets when it
// (re)starts a server: Attach it again after a Restart. It is safe for
// concurrent use. The zero Admin is not usable: use New or Install.
type Admin struct {
	mu     sync.Mutex
	next   int64
	peers  map[*server.Peer]*peer // guarded by mu
	byID   map[int64]*server.Peer // guarded by mu
	killed int                    // connections killed so far; guarded by mu
	errMsg string                 // SetError's; guarded by mu
}

type peer struct {
	id     int64
	name   string
	killed bool
}

// New returns an Admin attached to no server.
func New() *Admin {
	return &Admin{peers: map[*server.Peer]*peer{}, byID: map[int64]*server.Peer{}}
}

// Install adds CLIENT LIST, CLIENT KILL ID and CLIENT ID to m, which must
// be running, and returns their state. It replaces m's server pre-hook, if
// it had one; miniredis's own SetError also uses that hook, and undoes
// Install: use the Admin's SetError instead.
func Install(m *miniredis.Miniredis) *Admin {
	a := New()
	a.Attach(m)
	return a
}

// Attach makes a the pre-hook of m's current server (m must be running):
// after m.Restart, which starts a new server without it, call it again.
// Connection ids keep growing across restarts.
func (a *Admin) Attach(m *miniredis.Miniredis) {
	m.Server().SetPreHook(a.hook)
}

// SetError makes every command fail with msg, as miniredis's SetError does
// (which would replace the hook); an empty msg ends it.
func (a *Admin) SetError(msg string) {
	a.mu.Lock()
	a.errMsg = msg
	a.mu.Unlock()
}

// Killed returns how many connections CLIENT KILL has killed.
func (a *Admin) Killed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.killed
}

func (a *Admin) hook(c *server.Peer, cmd string, args ...string) bool {
	a.mu.Lock()
	p := a.peers[c]
	if p == nil {
		a.next++
		p = &peer{id: a.next}
		a.peers[c], a.byID[p.id] = p, c
		c.OnDisconnect(func() {
			a.mu.Lock()
			delete(a.peers, c)
			delete(a.byID, p.id)
			a.mu.Unlock()
		})
	}
	killed, errMsg := p.killed, a.errMsg
	if errMsg == "" && cmd == "CLIENT" && len(args) == 2 && strings.EqualFold(args[0], "setname") && !strings.ContainsAny(args[1], " \n") {
		p.name = args[1] // miniredis sets its own copy too
	}
	a.mu.Unlock()
	if killed {
		c.Close() // not executed; the server closes the connection after this command
		return true
	}
	if errMsg != "" {
		c.WriteError(errMsg)
		return true
	}
	if cmd != "CLIENT" || len(args) == 0 {
		return false
	}
	switch strings.ToUpper(args[0]) {
	case "ID":
		if len(args) != 1 {
			c.WriteError("ERR wrong number of arguments for 'client|id' command")
			return true
		}
		c.WriteInt(int(p.id))
		return true
	case "LIST":
		ids, err := listFilter(args[1:])
		if err != "" {
			c.WriteError(err)
			return true
		}
		c.WriteBulk(a.list(ids))
		return true
	case "KILL":
		if len(args) != 3 || !strings.EqualFold(args[1], "id") {
			c.WriteError("ERR miniadmin: only CLIENT KILL ID <id> is supported")
			return true
		}
		id, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			c.WriteError("ERR client-id should be greater than 0")
			return true
		}
		if !a.kill(id) {
			c.WriteError("ERR No such client")
			return true
		}
		c.WriteInt(1)
		return true
	}
	return false
}

// listFilter parses CLIENT LIST's arguments: none, or ID and one or more
// ids. A nil set means every connection.
func listFilter(args []string) (map[int64]bool, string) {
	if len(args) == 0 {
		return nil, ""
	}
	if !strings.EqualFold(args[0], "id") {
		return nil, "ERR miniadmin: only CLIENT LIST [ID <id> ...] is supported"
	}
	if len(args) == 1 {
		return nil, "ERR syntax error"
	}
	ids := make(map[int64]bool, len(args)-1)
	for _, s := range args[1:] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, "ERR Invalid client ID"
		}
		ids[id] = true
	}
	return ids, ""
}

// list is CLIENT LIST's reply: the live connections, or those of ids.
func (a *Admin) list(ids map[int64]bool) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, p := range a.peers {
		if p.killed || (ids != nil && !ids[p.id]) {
			continue
		}
		fmt.Fprintf(&b, "id=%d addr=miniredis name=%s\n", p.id, p.name)
	}
	return b.String()
}

func (a *Admin) kill(id int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.byID[id]
	if !ok || a.peers[c].killed {
		return false
	}
	a.peers[c].killed = true
	a.killed++
	return true
}
