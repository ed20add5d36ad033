// Package miniadmin gives a miniredis server the two CLIENT subcommands a
// fleet's driver uses to sever dropped members' connections (CLIENT LIST,
// with each connection's id and name, and CLIENT KILL ID), which miniredis
// does not have. It is for tests and embedded demos only.
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

type admin struct {
	mu     sync.Mutex
	next   int64
	peers  map[*server.Peer]*peer // guarded by mu
	byID   map[int64]*server.Peer // guarded by mu
	killed int                    // connections killed so far; guarded by mu
}

type peer struct {
	id     int64
	name   string
	killed bool
}

// Install adds CLIENT LIST and CLIENT KILL ID to m. It replaces m's
// server pre-hook, if it had one.
func Install(m *miniredis.Miniredis) {
	a := &admin{peers: map[*server.Peer]*peer{}, byID: map[int64]*server.Peer{}}
	m.Server().SetPreHook(a.hook)
}

func (a *admin) hook(c *server.Peer, cmd string, args ...string) bool {
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
	killed := p.killed
	if cmd == "CLIENT" && len(args) == 2 && strings.EqualFold(args[0], "setname") && !strings.ContainsAny(args[1], " \n") {
		p.name = args[1] // miniredis sets its own copy too
	}
	a.mu.Unlock()
	if killed {
		c.Close() // not executed; the server closes the connection after this command
		return true
	}
	if cmd != "CLIENT" || len(args) == 0 {
		return false
	}
	switch strings.ToUpper(args[0]) {
	case "LIST":
		c.WriteBulk(a.list())
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

func (a *admin) list() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, p := range a.peers {
		if p.killed {
			continue
		}
		fmt.Fprintf(&b, "id=%d addr=miniredis name=%s\n", p.id, p.name)
	}
	return b.String()
}

func (a *admin) kill(id int64) bool {
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
