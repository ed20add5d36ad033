package redshardtest

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"

	"github.com/redshard/redshard/internal/miniadmin"
)

// TB is the part of testing.TB that the New functions use: pass a
// *testing.T, *testing.B or *testing.F. The package does not import
// "testing", so that a program (an embedded demo) can use its Start
// functions.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Server is a miniredis server on 127.0.0.1 with the CLIENT subcommands
// that redshard uses and miniredis lacks: CLIENT LIST (each connection's
// id and name, all or CLIENT LIST ID <id>...), CLIENT KILL ID <id> and
// CLIENT ID. A fleet's Apply needs the first two on every server, to sever
// the connections of members the fleet dropped. A killed connection's next
// command is not executed, and the connection closes.
//
// Everything else is miniredis's (the embedded *miniredis.Miniredis: Keys,
// Get, FastForward, ...), except Restart and SetError, which keep the
// CLIENT subcommands: miniredis's Start, StartAddr and its own SetError
// (through s.Miniredis) do not. CLIENT TRACKING is not among them: see the
// package documentation. A Server is safe for concurrent use as miniredis
// is.
type Server struct {
	*miniredis.Miniredis
	admin *miniadmin.Admin
}

// StartServer starts a Server on a free port of 127.0.0.1. The caller
// closes it (Close); NewServer is the same for a test.
func StartServer() (*Server, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("redshardtest: starting a miniredis server: %w", err)
	}
	return &Server{Miniredis: m, admin: miniadmin.Install(m)}, nil
}

// NewServer starts a Server, closed when t's test ends (t.Cleanup). It
// fails t (Fatalf) if the server cannot start.
func NewServer(t TB) *Server {
	t.Helper()
	s, err := StartServer()
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Restart starts a closed Server again on its address, with its data and
// its CLIENT subcommands (miniredis alone would restart without them).
// Connection ids keep growing, where Redis would start again from 1.
func (s *Server) Restart() error {
	if err := s.Miniredis.Restart(); err != nil {
		return err
	}
	s.admin.Attach(s.Miniredis)
	return nil
}

// SetError makes every command fail with msg, as miniredis's SetError
// does, until SetError(""); unlike miniredis's, it keeps the CLIENT
// subcommands for after.
func (s *Server) SetError(msg string) { s.admin.SetError(msg) }

// Killed returns how many connections CLIENT KILL has killed on s: after
// a fleet's Apply, those of the members it dropped.
func (s *Server) Killed() int { return s.admin.Killed() }
