package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
)

// NewCluster starts a Redis Cluster of three primaries, the slots split in
// three, stopped at cleanup, and returns its nodes' addresses once every
// node says the cluster is ok.
func NewCluster(t testing.TB) []string {
	t.Helper()
	nodes := NewN(t, 3, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
	ctx := context.Background()
	var addrs []string
	for i, n := range nodes {
		c := n.TestClient(t)
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(nodes[0].Addr(), ":")
			if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
		addrs = append(addrs, n.Addr())
	}
	poll.Require(t, 10*time.Second, "cluster state ok", func() bool {
		for _, n := range nodes {
			info, err := n.TestClient(t).ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	return addrs
}
