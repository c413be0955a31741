package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	dlsv1 "github.com/caerus-dev/dls/sdks/go/caerus/dls/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys of the contract (proto/README.md, "Metadata").
const (
	mdLeaderAddr = "x-dls-leader-addr"
	mdErrorKind  = "x-dls-error"
)

// client is a connection to one node, re-pointed at the leader when a follower names it.
type client struct {
	apiKey string
	out    io.Writer

	mu   sync.Mutex // guards the fields below: heartbeats run beside the main flow
	addr string
	conn *grpc.ClientConn
	lock dlsv1.LockServiceClient
}

func dial(addr, apiKey string) (*client, error) {
	c := &client{apiKey: apiKey, out: io.Discard}
	if err := c.connect(addr); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *client) connect(addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	c.mu.Lock()
	old := c.conn
	c.addr, c.conn, c.lock = addr, conn, dlsv1.NewLockServiceClient(conn)
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

func (c *client) stub() dlsv1.LockServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lock
}

func (c *client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.conn.Close()
}

// outgoing adds the API key, when there is one, as `authorization: Bearer <key>`.
func (c *client) outgoing(ctx context.Context) context.Context {
	if c.apiKey == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.apiKey)
}

// leaderAddr returns the leader a follower named in its UNAVAILABLE answer, or "". Error
// metadata arrives as trailers (or as headers of a trailers-only answer): look in both.
func leaderAddr(err error, mds ...metadata.MD) string {
	if status.Code(err) != codes.Unavailable {
		return ""
	}
	for _, md := range mds {
		if v := md.Get(mdLeaderAddr); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}

// describe adds the x-dls-error kind to an error, e.g. "LOCK_TIMEOUT: rpc error: ...".
func describe(err error, mds ...metadata.MD) error {
	for _, md := range mds {
		if v := md.Get(mdErrorKind); len(v) > 0 {
			return fmt.Errorf("%s: %w", v[0], err)
		}
	}
	return err
}

// unary runs one call, following a follower's redirect to the leader once. The call must
// read c.stub() itself so the retry goes to the new node, with the same request. A
// follower that reaches the leader relays the call and names the leader in the answer's
// headers: the call is done, and the next ones go to the leader directly.
func (c *client) unary(ctx context.Context, call func(ctx context.Context, opts ...grpc.CallOption) error) error {
	for redirected := false; ; redirected = true {
		var hdr, trl metadata.MD
		err := call(c.outgoing(ctx), grpc.Header(&hdr), grpc.Trailer(&trl))
		if leader := leaderAddr(err, hdr, trl); leader != "" && !redirected {
			if cerr := c.redirect("not the leader", leader); cerr != nil {
				return cerr
			}
			continue
		}
		if err != nil {
			return describe(err, hdr, trl)
		}
		if leader := relayedFrom(hdr); leader != "" && leader != c.address() {
			return c.redirect("relayed by a follower", leader)
		}
		return nil
	}
}

// relayedFrom returns the leader a follower relayed a successful call from, or "".
func relayedFrom(hdr metadata.MD) string {
	if v := hdr.Get(mdLeaderAddr); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c *client) address() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

func (c *client) redirect(why, leader string) error {
	fmt.Fprintf(c.out, "%s: following x-dls-leader-addr to %s\n", why, leader)
	return c.connect(leader)
}

// newRequestID makes the client-chosen id that turns a retry into a replay of the first
// attempt: 32 hex characters, within the contract's [A-Za-z0-9._:-]{1,64}.
func newRequestID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func (c *client) begin(ctx context.Context, lease time.Duration, name string) (uint64, error) {
	req := &dlsv1.BeginTransactionRequest{TimeoutMs: lease.Milliseconds(), Name: name, RequestId: newRequestID()}
	var resp *dlsv1.BeginTransactionResponse
	err := c.unary(ctx, func(ctx context.Context, opts ...grpc.CallOption) (err error) {
		resp, err = c.stub().BeginTransaction(ctx, req, opts...)
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetTransactionId(), nil
}

// heartbeat renews the lease every lease/3 until ctx ends. FAILED_PRECONDITION means the
// transaction is gone (TRANSACTION_LOST): its locks may already be someone else's, so the
// work is cancelled. Other errors are transient: the next beat is the retry.
func (c *client) heartbeat(ctx context.Context, txID uint64, lease time.Duration, out io.Writer, lost context.CancelCauseFunc) {
	tick := time.NewTicker(lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := c.unary(ctx, func(ctx context.Context, opts ...grpc.CallOption) error {
			_, err := c.stub().Heartbeat(ctx, &dlsv1.HeartbeatRequest{TransactionId: txID}, opts...)
			return err
		})
		switch {
		case err == nil, ctx.Err() != nil:
		case status.Code(err) == codes.FailedPrecondition:
			fmt.Fprintf(out, "lease lost: %v\n", err)
			lost(fmt.Errorf("transaction %d lost its lease: %w", txID, err))
			return
		default:
			fmt.Fprintf(out, "heartbeat failed (will retry): %v\n", err)
		}
	}
}

// acquireExclusive streams AcquireLock: zero or more Queued messages, then one Granted.
// A stream that breaks (or a follower's redirect) is re-attached with the same request_id,
// which returns the same wait or the same grant and token instead of queueing twice.
func (c *client) acquireExclusive(ctx context.Context, txID uint64, namespace, key string, wait time.Duration, queued func(uint32, []uint64)) (*dlsv1.Granted, error) {
	req := &dlsv1.AcquireLockRequest{
		TransactionId: txID, Namespace: namespace, Key: key,
		Mode: dlsv1.LockMode_EXCLUSIVE, TimeoutMs: wait.Milliseconds(), RequestId: newRequestID(),
	}
	redirected := false
	for attempt := 0; ; attempt++ {
		stream, err := c.stub().AcquireLock(c.outgoing(ctx), req)
		if err != nil {
			return nil, err
		}
		for {
			msg, err := stream.Recv()
			if err == nil {
				if g := msg.GetGranted(); g != nil {
					return g, nil
				}
				if q := msg.GetQueued(); q != nil {
					queued(q.GetPosition(), q.GetBlockingTransactionIds())
				}
				continue
			}
			if err == io.EOF {
				return nil, errors.New("stream ended without a grant")
			}
			hdr, _ := stream.Header()
			trl := stream.Trailer()
			if leader := leaderAddr(err, hdr, trl); leader != "" && !redirected {
				redirected = true
				if cerr := c.redirect("not the leader", leader); cerr != nil {
					return nil, cerr
				}
				break
			}
			// UNAVAILABLE without a leader: an election or a lost connection. Back off and
			// re-attach a few times; the wait is still queued on the server.
			if status.Code(err) == codes.Unavailable && attempt < 5 && ctx.Err() == nil {
				time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				break
			}
			return nil, describe(err, hdr, trl)
		}
	}
}

// end commits or aborts; retry-safe with its request_id.
func (c *client) end(ctx context.Context, txID uint64, commit bool) error {
	req := &dlsv1.EndTransactionRequest{TransactionId: txID, Commit: commit, RequestId: newRequestID()}
	return c.unary(ctx, func(ctx context.Context, opts ...grpc.CallOption) error {
		_, err := c.stub().EndTransaction(ctx, req, opts...)
		return err
	})
}
