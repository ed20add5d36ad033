package registry

import (
	"encoding/json"
	"fmt"
	"time"
)

// Member is one live process of a fleet as it reports itself with
// Heartbeat: who it is and which config version it has acknowledged (it
// routes by it and has done what its phase asks).
type Member struct {
	// ID names the process uniquely in the fleet (for example
	// host/pid/start time); it is the key of its entry.
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Incarnation is a random token a process draws when it starts, so
	// that two processes (one paused, one that reuses its ID, or two
	// whose IDs merely look alike) are never the same member: a fleet
	// process names its connections to the shards with its ID and
	// incarnation, and a driver spares exactly the (ID, Incarnation)
	// pairs it reads here. Empty: a member that names no connection
	// (written by hand or by an older version), whose connections a
	// driver does not spare.
	Incarnation string `json:"incarnation,omitempty"`
	// Epoch and Phase are the version the process has acknowledged.
	Epoch uint64 `json:"epoch"`
	Phase Phase  `json:"phase,omitempty"`
	// Config is the ID (Config.ID) of the config the process has
	// acknowledged: with Epoch and Phase it names that config exactly.
	Config string `json:"config,omitempty"`
	// Fenced says the process refuses keys a change could move, because
	// it lost the registry for longer than its lease (DESIGN.md semantics
	// 10), until it has caught up.
	Fenced bool `json:"fenced,omitempty"`
	// Started is when the process started; informational.
	Started time.Time `json:"started,omitzero"`
	// Seen is set by Heartbeat to the heartbeating process's clock (UTC).
	// Expiry does not depend on it: the registry's own clock does that.
	Seen time.Time `json:"seen,omitzero"`
}

// Version returns the version m has acknowledged.
func (m Member) Version() Version { return Version{m.Epoch, m.Phase} }

// Acked returns the members of members that have not acknowledged v: those
// whose version is before it (a member ahead of v has acknowledged it too).
// A driver advances a change to its next phase only when Acked(Members(),
// current) is empty, so that no two live processes are more than one phase
// apart. The result keeps the order of members; it is nil when every
// member is up to date.
func Acked(members []Member, v Version) (late []Member) {
	for _, m := range members {
		if m.Version().Less(v) {
			late = append(late, m)
		}
	}
	return late
}

// AckedConfig sorts the members by what they report of cfg: late have not
// acknowledged it yet (their version is before it; a member that reports
// nothing yet is joining), and astray report a config that is not cfg and
// not before it, either a newer version or cfg's version with another ID.
// A member astray has followed a config the registry no longer holds: the
// registry lost data or was restored from an older copy, and a driver must
// not count such a member as having acknowledged anything (fleet.Apply
// restores the registry from the servers' beacons instead). A member that
// reports cfg's version with no ID (a process older than Config IDs)
// counts as having acknowledged it.
func AckedConfig(members []Member, cfg Config) (late, astray []Member) {
	v, id := cfg.Version(), cfg.ID()
	for _, m := range members {
		mv := m.Version()
		switch {
		case mv.Less(v):
			late = append(late, m)
		case mv == v && (m.Config == "" || m.Config == id):
		default:
			astray = append(astray, m)
		}
	}
	return late, astray
}

// EncodeMember stamps m.Seen with now and returns it as the registry stores
// it. It fails with ErrInvalidArgument for an empty ID.
func EncodeMember(m Member) ([]byte, error) {
	if m.ID == "" {
		return nil, fmt.Errorf("%w: empty member id", ErrInvalidArgument)
	}
	m.Seen = now()
	return json.Marshal(m)
}

// DecodeMember parses a member stored by EncodeMember.
func DecodeMember(data []byte) (Member, error) {
	var m Member
	if err := json.Unmarshal(data, &m); err != nil {
		return Member{}, fmt.Errorf("registry: stored member: %w", err)
	}
	return m, nil
}

// InUse returns Heartbeat's refusal of m, which matches ErrMemberIDInUse:
// a live entry for m.ID holds the incarnation stored. Registry
// implementations return it so that every backend says the same.
func InUse(m Member, stored string) error {
	return fmt.Errorf("%w: heartbeat of %q (incarnation %q): the registry holds a live entry for it with incarnation %q",
		ErrMemberIDInUse, m.ID, m.Incarnation, stored)
}
