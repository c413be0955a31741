package main

// These tests run the sample against real `dls` processes on free 127.0.0.1 ports
// (DLS_BIN names the binary; `make test-go-sample` passes the debug build).

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dlsv1 "github.com/caerus-dev/dls/sdks/go/caerus/dls/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// syncBuffer is an io.Writer the sample writes to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCluster starts n dls nodes (1 = single-node cluster) and returns their gRPC addresses
// once every node agrees on a leader, and that leader's node id.
func startCluster(t *testing.T, n int) ([]string, uint64) {
	t.Helper()
	bin := os.Getenv("DLS_BIN")
	if bin == "" {
		t.Fatal("DLS_BIN is not set: run `make test-go-sample`, or DLS_BIN=/path/to/dls go test ./...")
	}
	addrs := make([]string, n)
	httpAddrs := make([]string, n)
	var peers []string
	for i := range addrs {
		addrs[i] = freeAddr(t)
		// The client address, then the peer port (raft only) on the same host.
		peerAddr := freeAddr(t)
		peers = append(peers, fmt.Sprintf("%d=%s/%s", i+1, addrs[i], peerAddr[strings.LastIndex(peerAddr, ":")+1:]))
	}
	for i, addr := range addrs {
		httpAddrs[i] = freeAddr(t)
		args := []string{"serve", "--node-id", strconv.Itoa(i + 1), "--listen", addr,
			"--http-listen", httpAddrs[i], "--data-dir", t.TempDir(), "--log", "warn"}
		if n > 1 {
			args = append(args, "--peers", strings.Join(peers, ","))
		}
		cmd := exec.Command(bin, args...)
		// Peers authenticate each other; on loopback a cluster secret is enough.
		cmd.Env = append(os.Environ(), "DLS_CLUSTER_SECRET=go-sample-test-cluster-secret")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	// Wait (bounded) until every node names the same leader and says it is ready (/readyz:
	// the elected leader only once it serves, not while it catches up with the log).
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if leader := agreedLeader(addrs); leader != 0 && allReady(httpAddrs) {
			return addrs, leader
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no agreed leader among %v within 30s", addrs)
	return nil, 0
}

func agreedLeader(addrs []string) uint64 {
	var leader uint64
	for _, addr := range addrs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := dlsv1.NewAdminServiceClient(conn).ClusterStatus(ctx, &dlsv1.ClusterStatusRequest{})
		cancel()
		_ = conn.Close()
		if err != nil || st.GetLeaderId() == 0 || (leader != 0 && st.GetLeaderId() != leader) {
			return 0
		}
		leader = st.GetLeaderId()
	}
	return leader
}

// allReady reports whether every node's HTTP port answers /readyz with 200.
func allReady(httpAddrs []string) bool {
	client := http.Client{Timeout: time.Second}
	for _, addr := range httpAddrs {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

var tokenLine = regexp.MustCompile(`granted (\S+)/(\S+): fencing token (\d+)`)

// grantedToken returns the fencing token the sample printed, failing the test if none.
func grantedToken(t *testing.T, out string) uint64 {
	t.Helper()
	m := tokenLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the sample printed no fencing token:\n%s", out)
	}
	tok, err := strconv.ParseUint(m[3], 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("bad fencing token %q in:\n%s", m[3], out)
	}
	return tok
}

func sampleConfig(addr, key string) config {
	return config{addr: addr, namespace: "go-sample", key: key, lease: 3 * time.Second, wait: 30 * time.Second, hold: 300 * time.Millisecond}
}

func TestTakesLockPrintsTokenAndCommits(t *testing.T) {
	addrs, _ := startCluster(t, 1)
	// Held for 2.5 leases: the commit only succeeds if the heartbeats kept the lease alive.
	cfg := sampleConfig(addrs[0], "solo")
	cfg.lease, cfg.hold = time.Second, 2500*time.Millisecond
	var out syncBuffer
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	grantedToken(t, out.String())
	if !strings.Contains(out.String(), "committed transaction") {
		t.Fatalf("no commit line:\n%s", out.String())
	}
}

func TestQueuesBehindHolderThenGetsHigherToken(t *testing.T) {
	addrs, _ := startCluster(t, 1)
	ctx := context.Background()
	conn, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lock := dlsv1.NewLockServiceClient(conn)

	// Another transaction holds the lock first.
	tx, err := lock.BeginTransaction(ctx, &dlsv1.BeginTransactionRequest{TimeoutMs: 30000, RequestId: "holder-begin"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := lock.AcquireLock(ctx, &dlsv1.AcquireLockRequest{TransactionId: tx.GetTransactionId(), Namespace: "go-sample",
		Key: "contended", Mode: dlsv1.LockMode_EXCLUSIVE, TimeoutMs: 5000, RequestId: "holder-acquire"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetGranted() == nil {
		t.Fatalf("holder not granted: %v %v", first, err)
	}

	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, sampleConfig(addrs[0], "contended"), &out) }()

	// The sample must report its place in the queue before it can get the lock.
	want := fmt.Sprintf("at position 1 (waiting for transactions [%d])", tx.GetTransactionId())
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sample never printed %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "granted") {
		t.Fatalf("granted while another transaction held the lock:\n%s", out.String())
	}
	if _, err := lock.EndTransaction(ctx, &dlsv1.EndTransactionRequest{TransactionId: tx.GetTransactionId(), Commit: true, RequestId: "holder-end"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if tok := grantedToken(t, out.String()); tok <= first.GetGranted().GetFencingToken() {
		t.Fatalf("token %d not above the previous holder's %d", tok, first.GetGranted().GetFencingToken())
	}
}

func TestFollowsLeaderAddressFromAFollower(t *testing.T) {
	addrs, leader := startCluster(t, 3)
	follower := addrs[leader%3] // node ids are 1..3; this picks a node other than the leader
	var out syncBuffer
	if err := run(context.Background(), sampleConfig(follower, "redirected"), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if want := "following x-dls-leader-addr to " + addrs[leader-1]; !strings.Contains(out.String(), want) {
		t.Fatalf("no redirect to the leader (%q):\n%s", want, out.String())
	}
	grantedToken(t, out.String())
}
