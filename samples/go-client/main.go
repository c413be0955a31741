// Command go-client takes one exclusive lock on a Caerus DLS cluster with nothing but the
// generated gRPC client (sdks/go): begin a transaction, keep its lease alive, acquire the
// lock while printing queue progress, print the fencing token, then commit.
//
//	go run . -addr 127.0.0.1:7070 -namespace billing -key invoice-42
//
// It shows the rules of proto/README.md a hand-written client must follow: request ids on
// every mutating call (so a retry returns the first outcome), heartbeats every lease/3, and
// following `x-dls-leader-addr` when a follower answers UNAVAILABLE.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"
)

func main() {
	cfg := config{}
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:7070", "host:port of any cluster node (a follower redirects to the leader)")
	flag.StringVar(&cfg.namespace, "namespace", "samples", "lock namespace")
	flag.StringVar(&cfg.key, "key", "go-client", "lock key")
	flag.DurationVar(&cfg.lease, "lease", 3*time.Second, "transaction lease; heartbeats go out every lease/3")
	flag.DurationVar(&cfg.wait, "wait", 30*time.Second, "how long to wait in the lock's queue")
	flag.DurationVar(&cfg.hold, "hold", time.Second, "how long to hold the lock before committing")
	flag.StringVar(&cfg.apiKey, "api-key", os.Getenv("DLS_API_KEY"), "API key for servers with an API keys file (default $DLS_API_KEY)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\nTakes one EXCLUSIVE lock with the raw gRPC contract, prints its fencing token, commits.\n\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("unexpected argument %q (see -help)", flag.Arg(0))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatalf("go-client: %v", err)
	}
}

type config struct {
	addr, namespace, key, apiKey string
	lease, wait, hold            time.Duration
}

// run does the whole lock lifecycle, printing one line per step to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.namespace == "" || cfg.key == "" {
		return fmt.Errorf("-namespace and -key must not be empty")
	}
	c, err := dial(cfg.addr, cfg.apiKey)
	if err != nil {
		return err
	}
	defer c.close()
	c.out = out

	txID, err := c.begin(ctx, cfg.lease, "go-client-sample")
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	fmt.Fprintf(out, "began transaction %d (lease %s) on %s\n", txID, cfg.lease, c.addr)

	// Heartbeats run for as long as the transaction does; losing the lease cancels the work.
	work, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	go c.heartbeat(work, txID, cfg.lease, out, lost)

	granted, err := c.acquireExclusive(work, txID, cfg.namespace, cfg.key, cfg.wait, func(position uint32, blockers []uint64) {
		fmt.Fprintf(out, "queued for %s/%s at position %d (waiting for transactions %v)\n", cfg.namespace, cfg.key, position, blockers)
	})
	if err != nil {
		_ = c.end(context.WithoutCancel(ctx), txID, false)
		return fmt.Errorf("acquire %s/%s: %w", cfg.namespace, cfg.key, err)
	}
	fmt.Fprintf(out, "granted %s/%s: fencing token %d\n", granted.GetNamespace(), granted.GetKey(), granted.GetFencingToken())

	// The protected work goes here; pass the fencing token to the storage it writes to.
	select {
	case <-time.After(cfg.hold):
	case <-work.Done():
		return fmt.Errorf("stopped while holding the lock: %w", context.Cause(work))
	}

	if err := c.end(ctx, txID, true); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	fmt.Fprintf(out, "committed transaction %d, lock released\n", txID)
	return nil
}
