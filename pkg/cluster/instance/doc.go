// Package instance is this process's instance of a cluster
// (cluster.enabled, DESIGN 12): the ownership (pkg/ownership) of a process
// that shares its pipelines with others through PostgreSQL. It takes up
// the pipelines whose lease it acquires and hands over the others, fences
// every write of a pipeline with its lease's token, stops writing to
// destinations once a lease may have expired, and shows the pipelines the
// other instances run through this process's API (instance_api.go).
//
// The leases, membership, commands and tables are pkg/cluster's; the
// pipelines themselves are the runtime's, which Open is given as a Host:
// this package decides when a pipeline is taken up, handed over or
// forgotten, the Host carries it out.
//
// What an instance knows - the leases it holds and the time of its last
// renewal, the pipelines it knows, the database's view as of the last
// round, the other instances' views, the pending deletions, the watchers
// of events, its figures - is one value (fleetState, state.go) owned by
// one goroutine, the keeper (keeper.go). The renewal loop, the balance
// loop, plans and API calls send it changes and wait until they are
// published; everybody reads the value it published last, which never
// changes, so the fence of every write of the store and the guard of
// every destination write cost an atomic load and a map lookup. A change
// only computes (no clock, no I/O, no waiting), so the keeper waits on
// nothing but its inbox and may be sent a change from anywhere - from a
// plan, which holds the runtime's plan turn, or from a take-up - without
// a cycle of waits. The loops' own bookkeeping (the commands being carried
// out, whether renewals fail) stays in the loop that keeps it.
package instance
