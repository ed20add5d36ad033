// Package loan keeps a client open while what it handed out is in use.
//
// A client whose handle (the Client) is never closed is closed once the
// handle is unreachable: a cleanup on the handle calls Loans.Orphan. But
// what the client handed out refers to its state, never to the handle: a
// PubSub reaches the state through its multiplexer, an AutoPipeliner
// through its front client, a Conn through its hooks. So each of them is
// lent: counted as open from the moment it is handed out until it is done
// with, and Orphan closes the client only once no loan is open; otherwise
// it marks the client orphaned, and the last loan to end closes it. Both
// end on a cleanup or a goroutine of their own, in any order.
//
// go-redis lets us see an AutoPipeliner close (WaitClosed, see
// Loans.UntilClosed), but not a PubSub or a Conn: those are done with once
// unreachable (UntilUnreachable), which a closed one soon is (not a PubSub
// whose Channel runs, nor a Conn of one shard's client that made a new
// connection: go-redis refers to those until they are closed, and to the
// latter for good). Calls that hand out nothing that outlives them (Watch
// and its Tx, ForEachShard) keep the handle reachable until they return
// instead.
//
// What it needs from the root: a function that closes the client (New),
// and that each call that lends keeps the client's handle reachable until
// the loan is made (runtime.KeepAlive), so that the handle's cleanup runs
// after it.
//
// Concurrency: Loans is safe for concurrent use; one mutex guards the
// count. The close function is called at most once by the Loans, outside
// the mutex and never on the runtime's cleanup goroutine.
package loan
