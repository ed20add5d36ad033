package modelcheck

import "fmt"

// MinimalScenario is one script and why it fails, if it does.
type MinimalScenario struct {
	Name   string
	Known  string // why it fails on the current code, if it does: it is skipped
	Guards string // the failure it reproduced in an earlier protocol, since fixed
	Script func() *Script
}

// Minimal are the failures the model test found in an earlier version of
// the membership protocol, each reduced by hand to a short script of the
// same scheduler, checked by the same checker; all pass now (Guards says
// what each one caught).
var Minimal = []MinimalScenario{
	{Name: "rename-same-address", Guards: "renaming a shard at the same address deletes its keys", Script: func() *Script {
		// SET ten keys; rename shard s0 (same server); Rebalance; read.
		sc := Scenario{Rebalance: true, QuietRebalance: true, QuietChanges: true}
		s := NewScript("rename-same-address", sc, 3, 3, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		s.Change(RenameShard, 0)
		s.Rebalance(Own)
		return s
	}},
	{Name: "readdress", Guards: "a shard moved to a new address under the same name is neither handed off nor rebalanced", Script: func() *Script {
		// SET ten keys; move s0 to the spare server; read; Rebalance.
		sc := Scenario{Rebalance: true, QuietRebalance: true, QuietChanges: true}
		s := NewScript("readdress", sc, 3, 4, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		s.Change(Readdress, 0)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Get, Key: k} })
		s.Rebalance(Own)
		return s
	}},
	{Name: "set-in-flight-across-remove", Guards: "a SET in flight to the old owner when SetShards runs lands there after the key moved: acknowledged and lost", Script: func() *Script {
		// SET v1 everywhere; SET v2 on every key, each held before it
		// reaches its shard; remove s0; Rebalance; release; read.
		sc := Scenario{Rebalance: true, QuietChanges: true, Holds: true}
		s := NewScript("set-in-flight-across-remove", sc, 3, 3, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		var held []int
		for i, k := range s.Plan().Keys {
			held = append(held, s.Held(Before, Own, Single, Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(200 + i)}))
		}
		s.Change(RemoveShard, 0)
		s.Rebalance(Own) // in the background: its first move must wait for the held commands
		for _, id := range held {
			s.Release(id)
		}
		s.Quiesce()
		s.AwaitRebalance()
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Get, Key: k} })
		return s
	}},
	{Name: "get-in-flight-across-remove", Guards: "a GET in flight to the old owner when SetShards runs reaches it after the key moved and answers nil", Script: func() *Script {
		sc := Scenario{Rebalance: true, QuietChanges: true, Holds: true}
		s := NewScript("get-in-flight-across-remove", sc, 3, 3, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		var held []int
		for _, k := range s.Plan().Keys {
			held = append(held, s.Held(Before, Own, Single, Cmd{Kind: Get, Key: k}))
		}
		s.Change(RemoveShard, 0)
		s.Rebalance(Own) // in the background: its first move must wait for the held commands
		for _, id := range held {
			s.Release(id)
		}
		s.Quiesce()
		s.AwaitRebalance()
		return s
	}},
	{Name: "delete-during-rebalance", Guards: "a DEL while Rebalance moves the key is undone by Rebalance's RESTORE", Script: func() *Script {
		// SET everywhere; add a shard; Rebalance pauses between DUMP and
		// RESTORE; DEL everywhere; release.
		sc := Scenario{Rebalance: true, HoldRebalance: true}
		s := NewScript("delete-during-rebalance", sc, 3, 4, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		s.Change(AddShard, 0)
		id := s.Rebalance(Restore)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Del, Key: k} })
		s.Quiesce() // every DEL has returned
		s.Release(id)
		return s
	}},
	{Name: "delete-during-other-clients-handoff", Guards: "a DEL through one client is undone by another client's handoff of the key that DUMPed it before", Script: func() *Script {
		// Two clients. SET everywhere; add a shard; client 1 GETs every
		// key, each paused between its handoff's DUMP and RESTORE; client 0
		// DELs every key; release.
		sc := Scenario{Rebalance: true, QuietRebalance: true, Holds: true, Clients: 2}
		s := NewScript("delete-during-other-clients-handoff", sc, 3, 4, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		s.Change(AddShard, 0)
		var held []int
		for _, k := range s.Plan().Keys {
			held = append(held, s.HeldOn(1, Before, Restore, Single, Cmd{Kind: Get, Key: k}))
		}
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Del, Key: k} })
		s.Quiesce()
		for _, id := range held {
			s.Release(id)
		}
		s.Quiesce()
		return s
	}},
	{Name: "handoff-from-down-owner", Guards: "a handoff whose previous owner is unreachable answers as if the key were absent", Script: func() *Script {
		// SET everywhere; server 0 goes down; remove s0; read; server 0 up.
		sc := Scenario{Rebalance: true, QuietRebalance: true, QuietChanges: true, Faults: true}
		s := NewScript("handoff-from-down-owner", sc, 3, 3, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		s.Down(0)
		s.Change(RemoveShard, 0)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Get, Key: k} })
		s.Up()
		return s
	}},
	{Name: "removed-then-readded-reverts", Guards: "a write left on a removed shard comes back when the shard is re-added", Script: func() *Script {
		// SET v1 everywhere; SET v2 held before its shard; remove s0;
		// Rebalance; release (v2 lands on the removed server); DEL
		// everywhere; roll back to the first list; read.
		sc := Scenario{Rebalance: true, QuietChanges: true, Holds: true}
		s := NewScript("removed-then-readded-reverts", sc, 3, 3, 1, Keys(10)...)
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(100 + i)} })
		var held []int
		for i, k := range s.Plan().Keys {
			held = append(held, s.Held(Before, Own, Single, Cmd{Kind: Set, Key: k, Arg: fmt.Sprint(200 + i)}))
		}
		s.Change(RemoveShard, 0)
		s.Rebalance(Own) // in the background: its first move must wait for the held commands
		for _, id := range held {
			s.Release(id)
		}
		s.Quiesce()
		s.AwaitRebalance()
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Del, Key: k} })
		s.Change(Rollback, 0)
		s.Rebalance(Own)
		s.AwaitRebalance()
		s.Each(0, func(i int, k string) Cmd { return Cmd{Kind: Get, Key: k} })
		return s
	}},
}
