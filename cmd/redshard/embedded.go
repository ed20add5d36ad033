package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/redshardtest"
)

// embedded is a set of in-process miniredis shards, shard-0, shard-1, ...,
// for runs that need no server. Not safe for concurrent use.
type embedded struct {
	servers []*redshardtest.Server // with CLIENT LIST and KILL, which a fleet's driver uses
	shards  []redshard.Shard
	base    int // shards started by startEmbedded; later ones were added
	down    map[int]bool
}

// parseWeights parses "1,1,2".
func parseWeights(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		w, err := parseWeight(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// startEmbedded starts one miniredis per weight.
func startEmbedded(weights []float64) (*embedded, error) {
	e := &embedded{down: map[int]bool{}}
	for _, w := range weights {
		if _, err := e.start(w); err != nil {
			e.close()
			return nil, err
		}
	}
	e.base = len(weights)
	return e, nil
}

func (e *embedded) start(weight float64) (redshard.Shard, error) {
	m, err := redshardtest.StartServer()
	if err != nil {
		return redshard.Shard{}, fmt.Errorf("starting an embedded shard: %w", err)
	}
	s := redshard.Shard{Name: "shard-" + strconv.Itoa(len(e.servers)), Addr: m.Addr(), Weight: weight}
	e.servers = append(e.servers, m)
	e.shards = append(e.shards, s)
	return s, nil
}

// initial returns the shards started by startEmbedded.
func (e *embedded) initial() []redshard.Shard { return e.shards[:e.base] }

// add starts one more shard of weight 1.
func (e *embedded) add() (redshard.Shard, error) { return e.start(1) }

// kill closes shard i: its clients see connections refused from now on.
func (e *embedded) kill(i int) {
	e.servers[i].Close()
	e.down[i] = true
}

// reset makes the set as startEmbedded left it, empty: killed shards
// restart on their address, added ones are closed, and every key is gone.
func (e *embedded) reset() error {
	for i := range e.down {
		if err := e.servers[i].Restart(); err != nil {
			return fmt.Errorf("restarting %s: %w", e.shards[i].Name, err)
		}
		delete(e.down, i)
	}
	for _, m := range e.servers[e.base:] {
		m.Close()
	}
	e.servers, e.shards = e.servers[:e.base], e.shards[:e.base]
	for _, m := range e.servers {
		m.FlushAll()
	}
	return nil
}

func (e *embedded) close() {
	for _, m := range e.servers {
		m.Close()
	}
}

// describe names the shards for a report header.
func (e *embedded) describe() string {
	w := make([]string, e.base)
	for i, s := range e.initial() {
		w[i] = strconv.FormatFloat(s.Weight, 'g', -1, 64)
	}
	return fmt.Sprintf("%d embedded shards (miniredis, in this process), weights %s", e.base, strings.Join(w, ","))
}
