package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A Cluster of three masters forms with every slot served: a key written
// on each master through the Cluster client reads back, each master
// holds exactly the key of its slots, and a missing redis-cli is named
// with its Debian package.
func TestClusterFormsWithAKeyOnEachMaster(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3, 0)
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 {
		t.Fatalf("Masters = %d; want 3", len(masters))
	}
	rdb := c.Client(t)
	// One key per master: a key whose slot that master serves.
	keys := keyPerMaster(t, ctx, c, rdb, masters)
	for i, k := range keys {
		if err := rdb.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for i, m := range masters {
		direct := m.Client(t)
		n, err := direct.DBSize(ctx).Result()
		if err != nil || n != 1 {
			t.Fatalf("master %d holds %d keys, %v; want 1", i, n, err)
		}
		if got, err := direct.Get(ctx, keys[i]).Int(); err != nil || got != i {
			t.Fatalf("GET %s on master %d = %d, %v; want %d", keys[i], i, got, err, i)
		}
	}
}

// keyPerMaster returns, for each of masters, a key in a slot it serves.
func keyPerMaster(t *testing.T, ctx context.Context, c *Cluster, rdb *redis.ClusterClient, masters []*Server) []string {
	t.Helper()
	keys := make([]string, len(masters))
	found := 0
	for i := 0; found < len(masters) && i < 1000; i++ {
		k := fmt.Sprint("k", i)
		slot, err := rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.Owner(int(slot))
		if err != nil {
			t.Fatal(err)
		}
		for j, m := range masters {
			if m == owner && keys[j] == "" {
				keys[j] = k
				found++
			}
		}
	}
	if found != len(masters) {
		t.Fatalf("found keys for %d of %d masters", found, len(masters))
	}
	return keys
}

// MigrateSlot moves a slot with its keys; the Cluster client follows.
func TestClusterMigrateSlot(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3, 0)
	rdb := c.Client(t)
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	keys := keyPerMaster(t, ctx, c, rdb, masters)
	if err := rdb.Set(ctx, keys[0], "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	slot, err := rdb.ClusterKeySlot(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MigrateSlot(int(slot), masters[1]); err != nil {
		t.Fatal(err)
	}
	if n, err := masters[1].Client(t).Exists(ctx, keys[0]).Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS on the new owner = %d, %v; want 1", n, err)
	}
	if got, err := rdb.Get(ctx, keys[0]).Result(); err != nil || got != "v" {
		t.Fatalf("GET after the move = %q, %v; want v", got, err)
	}
}

func TestNewClusterWithoutRedisCliNamesThePackage(t *testing.T) {
	// PATH holds redis-server alone.
	dir := t.TempDir()
	server, err := exec.LookPath(Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(server, filepath.Join(dir, Binary)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	_, err = NewCluster(3, 0)
	if err == nil {
		t.Fatal("NewCluster without redis-cli on PATH succeeded; want an error")
	}
	for _, want := range []string{"redis-cli is not on PATH", "apt-get install redis-tools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
