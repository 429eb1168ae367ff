package locking_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/locking"
)

func ExampleClient_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// the example server is brand new: no restart quarantine (see WithFreshDeployment)
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	lease, err := locks.TryLock(ctx, "example-try", 10*time.Second)
	if err != nil {
		panic(err)
	}
	_, err = locks.TryLock(ctx, "example-try", 10*time.Second)
	fmt.Println("second try not obtained:", errors.Is(err, locking.ErrNotObtained))
	fmt.Println("release:", lease.Release(ctx))
	// Output:
	// second try not obtained: true
	// release: <nil>
}

func ExampleClient_Lock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()

	// ctx bounds the wait only; the lease is auto-extended until released
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := locks.Lock(ctx, "example-lock", 2*time.Second)
	if err != nil {
		panic(err)
	}
	defer lease.Release(context.Background())

	select {
	case <-lease.Done(): // the lock was lost: stop writing
		fmt.Println("lost:", lease.Err())
	default:
		fmt.Println("holding, fence > 0:", lease.Fence() > 0)
	}
	// Output: holding, fence > 0: true
}

func ExampleClient_Hold() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()

	err := locks.Hold(context.Background(), "nightly-invoices", 30*time.Second, func(ctx context.Context) error {
		// ctx ends if the lock is lost: pass it to every call that does work
		fmt.Println("sending invoices once")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// sending invoices once
	// err: <nil>
}

func ExampleLease_Release() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	// without auto-extension a lease ends at its validity deadline. (Lock
	// tries again where one TryLock of so short a lease can be refused: an
	// answer that comes after its validity grants nothing.)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lease, err := locks.Lock(wait, "example-expire", 200*time.Millisecond, locking.WithAutoExtend(false))
	if err != nil {
		panic(err)
	}
	<-lease.Done()
	err = lease.Release(ctx)
	fmt.Println(errors.Is(err, locking.ErrNotHeld), errors.Is(err, locking.ErrLost))
	// Output: true true
}

func ExampleNewQuorum() {
	// three independent masters: every lock needs two of them
	var masters []redis.UniversalClient
	for range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr}) // use three different servers
		defer rdb.Close()
		masters = append(masters, rdb)
	}
	locks, err := locking.NewQuorum(masters, locking.WithRestartQuarantine(time.Minute))
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	fmt.Println("quorum:", locks.Quorum())
	// Output: quorum: 2
}

func ExampleClient_Fill() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()
	rdb.Del(ctx, "example:report")

	// a slow computation behind a cache: on a miss one caller computes, in
	// every process, and the others wait for its value
	report := func(ctx context.Context) ([]byte, error) { return []byte("42 orders"), nil }
	for range 2 {
		v, err := locks.Fill(ctx, rdb, "example:report", time.Minute, report)
		fmt.Println(string(v), err)
	}
	// Output:
	// 42 orders <nil>
	// 42 orders <nil>
}

func ExampleClient_TryLockAll() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	// move stock between two warehouses: both or neither
	set, err := locks.TryLockAll(ctx, []string{"stock:berlin", "stock:lyon"}, 10*time.Second)
	if err != nil {
		panic(err)
	}
	for _, l := range set.Leases() {
		fmt.Println("holding", l.Key())
	}
	fmt.Println("release:", set.Release(ctx))
	// Output:
	// holding stock:berlin
	// holding stock:lyon
	// release: <nil>
}

func ExampleClient_Semaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	// at most two exports run at once, across every process
	sem, _ := locks.Semaphore("example-exports", 2)
	a, _ := sem.TryAcquire(ctx, 10*time.Second)
	b, _ := sem.TryAcquire(ctx, 10*time.Second)
	_, err := sem.TryAcquire(ctx, 10*time.Second)
	fmt.Println("third:", errors.Is(err, locking.ErrNotObtained))
	fmt.Println(a.Release(ctx), b.Release(ctx))
	// Output:
	// third: true
	// <nil> <nil>
}

func ExampleClient_RWMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	// many readers of the price list at once, one writer alone
	prices, _ := locks.RWMutex("example-prices")
	r1, _ := prices.RLock(ctx, 10*time.Second)
	r2, _ := prices.RLock(ctx, 10*time.Second)
	_, err := prices.TryLock(ctx, 10*time.Second)
	fmt.Println("writer while reading:", errors.Is(err, locking.ErrNotObtained))
	_, _ = r1.Release(ctx), r2.Release(ctx)
	w, err := prices.TryLock(ctx, 10*time.Second)
	fmt.Println("writer after:", err)
	fmt.Println(w.Release(ctx))
	// Output:
	// writer while reading: true
	// writer after: <nil>
	// <nil>
}

func ExampleClient_FairSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx := context.Background()

	// three render slots, handed out in the order callers asked
	renders, _ := locks.FairSemaphore("example-renders", 3)
	l, err := renders.Acquire(ctx, 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("rendering as", l.Key())
	fmt.Println(l.Release(ctx))
	// Output:
	// rendering as fsem:example-renders
	// <nil>
}

func ExampleElection() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, _ := locking.New(rdb, locking.WithFreshDeployment())
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// every replica campaigns with its own id; one leads at a time
	election, _ := locks.Election("example-reindexer", 10*time.Second)
	term, err := election.Campaign(ctx, "replica-1") // blocks until replica-1 leads
	if err != nil {
		panic(err)
	}
	// lead while term.Context() lives (it ends if leadership is lost), pass
	// term.Fence() to storage that checks fences, resign on a graceful stop

	leader, ok, _ := election.Leader(ctx) // who leads now: a one-shot read
	fmt.Println("leading now:", leader.ID, ok, leader.Fence == term.Fence())

	// or follow the leaders as they change, until ctx ends
	leaders := election.Observe(ctx)
	fmt.Println("leader:", (<-leaders).ID)
	_ = term.Resign(ctx) // wakes the next candidate at once
	next, _ := election.Campaign(ctx, "replica-2")
	fmt.Println("leader:", (<-leaders).ID)
	_ = next.Resign(ctx)
	// Output:
	// leading now: replica-1 true true
	// leader: replica-1
	// leader: replica-2
}
