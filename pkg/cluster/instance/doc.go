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
// Each piece of an instance's state has one writer or one small lock of
// its own, never a lock over all of it: what the instance knows of the
// pipelines (replaced whole by each plan) and the database's view of the
// last round (replaced whole by the balance loop) are published as values
// that never change, which the API, the renewals and the balance loop
// read without waiting; the views of the other instances are the balance
// loop's alone; the commands being carried out are the command loop's
// alone, which its workers tell when they are done; the leases held
// (leases.go) are read by every write of the store and the destinations,
// so they keep a lock held for one map operation; the watchers of events
// (watchers.go) and the deletions waiting for a lease (deletions.go) keep
// theirs.
package instance
