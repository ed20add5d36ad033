package etcdregistry

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redshard/redshard/registry"
)

// NewLossy is NewOptions with a registry whose watchers treat every watch
// response as a broken watch, so they only learn of configs by re-listing.
func NewLossy(cli *clientv3.Client, prefix string, opt *registry.Options) (registry.Registry, error) {
	r, err := newRegistry(cli, prefix, opt)
	if err != nil {
		return nil, err
	}
	r.lossy = true
	return r, nil
}

// NewWatchingFrom is NewOptions with a registry whose watchers' first
// watch starts at revision rev (which may have been compacted).
func NewWatchingFrom(cli *clientv3.Client, prefix string, opt *registry.Options, rev int64) (registry.Registry, error) {
	r, err := newRegistry(cli, prefix, opt)
	if err != nil {
		return nil, err
	}
	r.watchFrom = rev
	return r, nil
}
