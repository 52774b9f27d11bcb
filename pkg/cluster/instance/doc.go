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
package instance
