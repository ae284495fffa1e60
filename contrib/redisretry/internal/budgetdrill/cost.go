package budgetdrill

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry"
	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// CostResult is what failing operations cost in Redis commands.
type CostResult struct {
	Ops      int // failing operations
	Granted  int // retries granted
	Commands int // Redis commands the Budget sent
}

// PerOp returns the commands per failing operation.
func (r CostResult) PerOp() float64 {
	if r.Ops == 0 {
		return 0
	}
	return float64(r.Commands) / float64(r.Ops)
}

// SteadyCost runs one Budget with default Options that fails rate
// operations a second for d, against addr, and counts the commands its
// client sends.
func SteadyCost(ctx context.Context, addr string, key string, rate int, d time.Duration) (CostResult, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	b, err := redisretry.NewBudget(rdb, key, Capacity, PerRequest)
	if err != nil {
		return CostResult{}, err
	}
	c := &counter{}
	rdb.AddHook(c)
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	ops, granted := failAtRate(runCtx, []*redisretry.Budget{b}, rate)
	b.Close() // its last flush is part of the cost
	return CostResult{Ops: ops, Granted: granted, Commands: int(c.n.Load())}, nil
}

// BurstCost runs one Budget with default Options behind a proxy that
// delays each direction by oneWay, and fails n operations at once: each
// deposits and asks for a retry.
func BurstCost(ctx context.Context, addr string, key string, n int, oneWay time.Duration) (CostResult, error) {
	proxy, err := redistest.NewLatencyProxy(addr, oneWay)
	if err != nil {
		return CostResult{}, err
	}
	defer proxy.Close()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, PoolSize: n})
	defer rdb.Close()
	b, err := redisretry.NewBudget(rdb, key, Capacity, PerRequest, redisretry.Options{CallTimeout: time.Second})
	if err != nil {
		return CostResult{}, err
	}
	defer b.Close()
	c := &counter{}
	rdb.AddHook(c)
	start := make(chan struct{})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			b.Deposit()
			if b.Withdraw(ctx) {
				granted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return CostResult{Ops: n, Granted: int(granted.Load()), Commands: int(c.n.Load())}, nil
}

// counter is a go-redis hook that counts the commands sent.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
