package instance

import (
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/store"
)

// The keeper's cost of taking up a thousand pipelines, four at a time as
// the balance loop does: a hold and a count each.
func BenchmarkKeeperTakeUp1000(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("pipeline-%04d", i)
	}
	for b.Loop() {
		k := newKeeper(initialState())
		sem := make(chan struct{}, takeUpParallelism)
		done := make(chan struct{}, len(ids))
		for i, id := range ids {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; done <- struct{}{} }()
				k.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: id, Token: int64(i)}) })
				k.update(func(d *draft) { d.counts.takenOver++ })
			}()
		}
		for range ids {
			<-done
		}
		k.close()
	}
}

// The fence of a write, read while the keeper publishes changes.
func BenchmarkFenceOfWhileChanging(b *testing.B) {
	f := newFleet(nil, Options{Log: zap.NewNop()}, &cluster.Membership{}, nil)
	defer f.keeper.close()
	for i := range 1000 {
		f.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: fmt.Sprint("p", i), Token: int64(i)}) })
	}
	key := []byte(store.PrefixPosition + store.KeyPart("p500") + "/x")
	stop := make(chan struct{})
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.update(func(d *draft) { d.hold(cluster.Lease{PipelineID: "moving", Token: int64(i)}) })
		}
	}()
	defer func() {
		close(stop)
		<-changed
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if f.fenceOf(key) == nil {
				b.Fatal("no fence")
			}
		}
	})
}
