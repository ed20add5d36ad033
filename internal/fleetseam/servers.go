package fleetseam

import (
	"encoding/json"

	"github.com/redshard/redshard/registry"
)

// Servers lists, once each by identity, the servers of the configs'
// documents (Doc, and PrevDoc in flight) as r parses them: with the
// connection settings of r's options.
func Servers(r Root, cfgs ...registry.Config) ([]Server, error) {
	var out []Server
	for _, cfg := range cfgs {
		for _, doc := range []json.RawMessage{cfg.Doc, cfg.PrevDoc} {
			if len(doc) == 0 {
				continue
			}
			ring, err := r.Parse(doc)
			if err != nil {
				return nil, err
			}
			for _, s := range ring.Servers {
				if !ContainsID(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	return out, nil
}

// ContainsID reports whether list holds a server with s's identity (its
// address, or its Sentinel master).
func ContainsID(list []Server, s Server) bool {
	for _, o := range list {
		if o.ID == s.ID {
			return true
		}
	}
	return false
}
