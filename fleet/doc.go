// Package fleet drives a fleet's change of ring: Apply takes a registry's
// driver lock and publishes the phases of the change (Prepare, Migrate,
// Commit, Stable) one by one, each once every live member of the fleet has
// acknowledged the previous, with the servers' beacons written before
// each phase and the data migration run in Migrate; RegistryBehind says
// whether a registry has fallen behind the fleet it serves. It is what
// the redshard CLI's apply runs (docs/membership.md, docs/operations.md).
//
// The package stands above the client library as etcd's concurrency
// package stands above clientv3: the processes of a fleet only need
// package redshard (NewClient with Options.Registry); the one process
// that changes the ring needs this one too. The driver is itself a
// member of the fleet: it runs a redshard.Client that follows the
// registry, and migrates the data with its Rebalance.
//
// Contract:
//   - Apply is safe to run again after any interruption (ctx, a lost
//     lock, a killed driver, a failed migration): with the same document
//     it resumes the change where it stopped; a change in flight to
//     another document is refused (redshard.ErrHandoffInProgress). A
//     second Apply while one runs fails with registry.ErrLocked.
//   - Before a phase that drops a member is published, that member's
//     command connections are severed on every server of both rings
//     (fencing at the data); the driver needs CLIENT LIST and CLIENT KILL.
//   - A registry that lost the fleet's config is restored from the
//     servers' beacons and the members' reports before anything else is
//     published; when it cannot be, Apply fails with
//     redshard.ErrRegistryBehind and changes nothing.
//   - On an empty registry, servers whose data another ring placed are
//     refused (redshard.ErrMisplacedData); nothing is published.
//
// Errors keep the root's values (redshard.ErrRegistryBehind,
// redshard.ErrHandoffInProgress, redshard.ErrMisplacedData,
// redshard.ErrLibrariesDiffer, registry.ErrLocked, ...): test them with
// errors.Is.
//
// Concurrency: Apply and RegistryBehind may be called from any goroutine;
// ApplyOptions.Progress is called from Apply's goroutine. The driver's
// client is closed before Apply returns; the goroutine that watches the
// lock ends as Apply returns.
//
// What it needs from the root: its public API (NewClient, Options,
// Client.Rebalance, Client.FleetStatus, the error values) and, through
// internal/fleetseam, the root's reading of a registry document and its
// way of dialing a server (connection settings, shard hooks, the fleet's
// admission), and its carrying of function libraries to joining servers.
// The beacons and the connection names are internal/beacons and
// internal/connname, shared with the root.
package fleet
