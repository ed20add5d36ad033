package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Phase is where a fleet is in a membership change. The phases of one
// change, in order, are Prepare, Migrate, Commit and Stable; a change is
// designed so that processes on any two adjacent phases are safe together
// (see the package documentation). The zero Phase belongs only to the zero
// Config: nothing published yet.
type Phase string

// The phases of a change, in the order they are published.
const (
	// Prepare: every process learns the next ring (Config.Doc) but keeps
	// routing by the previous one (Config.PrevDoc); no key moves.
	Prepare Phase = "prepare"
	// Migrate: processes route by the next ring and hand moved keys off
	// from their previous owners (docs/membership.md); Rebalance runs.
	Migrate Phase = "migrate"
	// Commit: every key has moved; processes release the previous owners
	// (close their clients, drop the change's settled sets).
	Commit Phase = "commit"
	// Stable: no change in flight; Config.Doc is the ring.
	Stable Phase = "stable"
)

// rank orders phases within an epoch; 0 for an unknown phase.
func (p Phase) rank() int {
	switch p {
	case Prepare:
		return 1
	case Migrate:
		return 2
	case Commit:
		return 3
	case Stable:
		return 4
	}
	return 0
}

// Valid reports whether p is one of the four phases.
func (p Phase) Valid() bool { return p.rank() != 0 }

// Version is the position of a config in a fleet's history: its epoch and
// phase. Versions are totally ordered: by epoch, then by phase in the order
// Prepare < Migrate < Commit < Stable. The zero Version (nothing published)
// is before every other.
type Version struct {
	Epoch uint64
	Phase Phase
}

// Less reports whether v comes before w.
func (v Version) Less(w Version) bool {
	if v.Epoch != w.Epoch {
		return v.Epoch < w.Epoch
	}
	return v.Phase.rank() < w.Phase.rank()
}

// String returns "epoch 3 migrate", or "none" for the zero Version.
func (v Version) String() string {
	if v == (Version{}) {
		return "none"
	}
	return "epoch " + strconv.FormatUint(v.Epoch, 10) + " " + string(v.Phase)
}

// Config is a fleet's ring configuration as the registry stores it: the
// document redshard.LoadConfig reads (Doc, raw JSON), with its epoch and the
// phase of the change that leads to it. The zero Config means nothing has
// been published; Get returns it for an empty registry, and it is the prev
// of the first Publish.
//
// While a change is in flight (Prepare, Migrate, Commit), PrevEpoch and
// PrevDoc hold the ring the change started from, Change names it and Driver
// says who drives it. In Stable they are empty.
//
// A Config is a value; the registry never changes one it has returned.
// Build successors with Initial, Begin, Advance and Abort rather than by
// hand: Publish refuses anything that is not a legal successor of prev (see
// CheckTransition).
type Config struct {
	Epoch     uint64          `json:"epoch"`
	Phase     Phase           `json:"phase"`
	Doc       json.RawMessage `json:"doc"`
	PrevEpoch uint64          `json:"prev_epoch,omitempty"`
	PrevDoc   json.RawMessage `json:"prev_doc,omitempty"`
	Change    string          `json:"change,omitempty"`
	Driver    string          `json:"driver,omitempty"`
	// Since is when this phase was built (the builder's clock, UTC); it is
	// for operators ("migrating for 3h") and plays no part in ordering.
	Since time.Time `json:"since,omitzero"`
	// Restored, set only on a config that Restore built, says where the
	// config was recovered from after the registry lost what it held.
	Restored string `json:"restored,omitempty"`
}

// Version returns c's epoch and phase.
func (c Config) Version() Version { return Version{c.Epoch, c.Phase} }

// ID identifies c within its version: the change id while a change is in
// flight, and a digest of the document when stable. Two configs with one
// version but different IDs come from different histories (a registry that
// lost its data and was given another config at the same epoch); an
// acknowledgement counts only for the config whose version and ID it
// names (AckedConfig).
func (c Config) ID() string {
	if c.InFlight() {
		return c.Change
	}
	if len(c.Doc) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(c.Doc, &v) != nil {
		return ""
	}
	canon, _ := json.Marshal(v) // as SameDoc compares
	sum := sha256.Sum256(canon)
	return "doc:" + hex.EncodeToString(sum[:8])
}

// Restore returns lost, the config the fleet last followed (read back from
// where it survived: the servers' beacons), marked Restored with how, to
// be published over a registry that lost it: prev is what the registry
// holds now, nothing or an older config (CheckTransition).
func Restore(lost Config, how string) Config {
	r := lost
	r.Restored = how
	r.Since = now()
	return r
}

// InFlight reports whether a change is in flight (Prepare, Migrate or
// Commit).
func (c Config) InFlight() bool {
	return c.Phase == Prepare || c.Phase == Migrate || c.Phase == Commit
}

// Initial returns the first config of a registry: epoch 1, Stable, with doc
// as the ring. Publish it with the zero Config as prev. To re-seed a
// registry that lost its data, set Epoch above the highest epoch the fleet
// has seen, or watchers that saw it will ignore the new config.
func Initial(doc json.RawMessage) Config {
	return Config{Epoch: 1, Phase: Stable, Doc: doc, Since: now()}
}

// Begin returns the Prepare config of a change from c (which must be
// Stable) to doc: epoch c.Epoch+1, with c's document as PrevDoc. change
// names the change (every process computes the same id for the same pair
// of rings) and driver the process that drives it.
func (c Config) Begin(doc json.RawMessage, change, driver string) Config {
	return Config{
		Epoch: c.Epoch + 1, Phase: Prepare, Doc: doc,
		PrevEpoch: c.Epoch, PrevDoc: c.Doc,
		Change: change, Driver: driver, Since: now(),
	}
}

// Advance returns the config of the phase after c's in the same change:
// Prepare → Migrate → Commit → Stable. It fails with ErrInvalidTransition
// when c is Stable (there is nothing to advance; Begin a change).
func (c Config) Advance() (Config, error) {
	n := c
	n.Since, n.Restored = now(), ""
	switch c.Phase {
	case Prepare:
		n.Phase = Migrate
	case Migrate:
		n.Phase = Commit
	case Commit:
		n = Config{Epoch: c.Epoch, Phase: Stable, Doc: c.Doc, Since: n.Since}
	default:
		return Config{}, fmt.Errorf("%w: %s has no next phase", ErrInvalidTransition, c.Version())
	}
	return n, nil
}

// Abort returns the config that calls off a change still in Prepare: Stable
// at epoch c.Epoch+1 with the previous document as the ring. No key has
// moved in Prepare, so the fleet can go straight back. A change in Migrate
// or later cannot be aborted (keys have moved); change back with a new
// change instead. Abort fails with ErrInvalidTransition outside Prepare.
func (c Config) Abort() (Config, error) {
	if c.Phase != Prepare {
		return Config{}, fmt.Errorf("%w: only a change in prepare can be aborted, not %s", ErrInvalidTransition, c.Version())
	}
	return Config{Epoch: c.Epoch + 1, Phase: Stable, Doc: c.PrevDoc, Since: now()}, nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// CheckTransition reports whether next may follow prev, as Publish checks
// before it writes anything. The legal steps are:
//
//	none             → Stable e (e ≥ 1; Initial)
//	Stable e         → Prepare e+1 (PrevEpoch e, PrevDoc = prev's Doc; Begin)
//	Prepare e        → Migrate e, same documents and change (Advance)
//	Migrate e        → Commit e, same documents and change (Advance)
//	Commit e         → Stable e, the same Doc (Advance)
//	Prepare e        → Stable e+1 with prev's PrevDoc (Abort)
//	anything older   → a config marked Restored (Restore), of any phase
//
// Every Doc must be a JSON object. Errors match ErrInvalidTransition.
func CheckTransition(prev, next Config) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s → %s: %s", ErrInvalidTransition, prev.Version(), next.Version(), fmt.Sprintf(format, args...))
	}
	if !isObject(next.Doc) {
		return bad("doc is not a JSON object")
	}
	if next.InFlight() {
		if !isObject(next.PrevDoc) {
			return bad("prev_doc is not a JSON object")
		}
		if next.Change == "" {
			return bad("a change in flight needs a change id")
		}
	} else if next.PrevEpoch != 0 || next.PrevDoc != nil || next.Change != "" || next.Driver != "" {
		return bad("a stable config has no previous document, change or driver")
	}
	sameChange := func() bool {
		return next.Epoch == prev.Epoch && next.PrevEpoch == prev.PrevEpoch &&
			SameDoc(next.Doc, prev.Doc) && SameDoc(next.PrevDoc, prev.PrevDoc) &&
			next.Change == prev.Change
	}
	switch {
	case next.Restored != "":
		if next.Epoch == 0 || !prev.Version().Less(next.Version()) {
			return bad("a restored config must be newer than what the registry holds")
		}
	case prev.Version() == (Version{}):
		if next.Phase != Stable || next.Epoch == 0 {
			return bad("the first config must be stable with an epoch of at least 1")
		}
	case prev.Phase == Stable:
		if next.Phase != Prepare || next.Epoch != prev.Epoch+1 || next.PrevEpoch != prev.Epoch || !SameDoc(next.PrevDoc, prev.Doc) {
			return bad("a change starts with prepare at the next epoch, from the stable document")
		}
	case prev.Phase == Prepare && next.Phase == Migrate, prev.Phase == Migrate && next.Phase == Commit:
		if !sameChange() {
			return bad("a phase of the same change must keep its epoch, documents and change id")
		}
	case prev.Phase == Commit && next.Phase == Stable:
		if next.Epoch != prev.Epoch || !SameDoc(next.Doc, prev.Doc) {
			return bad("a change ends stable at its epoch with its document")
		}
	case prev.Phase == Prepare && next.Phase == Stable:
		if next.Epoch != prev.Epoch+1 || !SameDoc(next.Doc, prev.PrevDoc) {
			return bad("an abort is stable at the next epoch with the previous document")
		}
	default:
		return bad("not a step of a change")
	}
	return nil
}

func isObject(doc json.RawMessage) bool {
	d := bytes.TrimLeft(doc, " \t\r\n")
	return len(d) > 0 && d[0] == '{' && json.Valid(doc)
}

// SameDoc reports whether two documents are the same JSON value: the same
// config whatever their spacing and the order of their object keys. Two
// empty documents are the same; an empty and a non-empty one, or one that
// is not JSON, are not.
func SameDoc(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x) // maps marshal with sorted keys
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// Encode returns c as the registry stores it (compact JSON). It fails for a
// Doc that is not valid JSON.
func (c Config) Encode() ([]byte, error) { return json.Marshal(c) }

// DecodeConfig parses a config stored by Encode.
func DecodeConfig(data []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("registry: stored config: %w", err)
	}
	if !c.Phase.Valid() || c.Epoch == 0 {
		return Config{}, fmt.Errorf("registry: stored config has no valid epoch and phase (%s)", c.Version())
	}
	return c, nil
}
