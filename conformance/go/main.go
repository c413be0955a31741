// Command conformance runs conformance/scenarios.json (format: conformance/README.md)
// against a Caerus DLS server through the raw generated Go client, sdks/go/caerus/dls/v1.
// It prints one line per scenario and exits 1 if any failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	dlsv1 "github.com/caerus-dev/dls/sdks/go/caerus/dls/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// patience bounds how long a step waits for the server: a hang guard, not a timing assertion.
const patience = 30 * time.Second

// capabilities are what this runner can express of the scenarios' `needs` (README
// "Capabilities"): a raw client sends every field, so it has every capability the file names.
var capabilities = map[string]bool{"permits": true}

func main() {
	_, self, _, _ := runtime.Caller(0)
	endpoint := flag.String("endpoint", "127.0.0.1:7070", "HOST:PORT of any node (leader redirects are followed)")
	apiKey := flag.String("api-key", os.Getenv("CAERUS_API_KEY"), "API key, sent as authorization: Bearer KEY")
	file := flag.String("scenarios", filepath.Join(filepath.Dir(self), "..", "scenarios.json"), "the scenario file")
	var only multiFlag
	flag.Var(&only, "only", "run only this scenario (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Runs the Caerus DLS conformance scenarios through the raw Go gRPC client.\n\nUsage: conformance [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()

	raw, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	var spec struct {
		Scenarios []map[string]any `json:"scenarios"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: parsing %s: %v\n", *file, err)
		os.Exit(2)
	}

	conn := newConnection(*endpoint, *apiKey)
	run := fmt.Sprintf("cf-go-%06x", time.Now().UnixNano()&0xffffff)
	passed, failed, skipped := 0, 0, 0
	for i, sc := range spec.Scenarios {
		name, _ := sc["name"].(string)
		if len(only) > 0 && !only.has(name) {
			continue
		}
		var lacking []string
		needs, _ := sc["needs"].([]any)
		for _, n := range needs {
			if c, _ := n.(string); !capabilities[c] {
				lacking = append(lacking, fmt.Sprint(n))
			}
		}
		if len(lacking) > 0 {
			skipped++
			fmt.Printf("SKIP %s (needs %s: not implemented by this runner)\n", name, strings.Join(lacking, ", "))
			continue
		}
		s := &scenario{conn: conn, ns: fmt.Sprintf("%s-%02d", run, i), txns: map[string]uint64{},
			tokens: map[string]uint64{}, handles: map[string]*background{}, watches: map[string]*keyWatch{},
			cursors: map[string]string{}, lostStream: map[string]bool{}, streams: map[string][]*stayOpen{}}
		if err := s.run(sc); err != nil {
			failed++
			fmt.Printf("FAIL %s: %v\n", name, err)
		} else {
			passed++
			fmt.Printf("PASS %s\n", name)
		}
	}
	fmt.Printf("go raw grpc runner: %d passed, %d failed, %d skipped (%s)\n", passed, failed, skipped, *endpoint)
	if failed > 0 {
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
func (m multiFlag) has(v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

// connection is one channel to the node believed to lead; it follows x-dls-leader-addr.
type connection struct {
	mu       sync.Mutex
	endpoint string
	conn     *grpc.ClientConn
	stub     dlsv1.LockServiceClient
	admin    dlsv1.AdminServiceClient
	md       metadata.MD
}

func newConnection(endpoint, apiKey string) *connection {
	c := &connection{md: metadata.MD{}}
	if apiKey != "" {
		c.md.Set("authorization", "Bearer "+apiKey)
	}
	c.connect(endpoint)
	return c
}

func (c *connection) connect(endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if endpoint == c.endpoint {
		return
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: bad endpoint %q: %v\n", endpoint, err)
		os.Exit(2)
	}
	c.endpoint, c.conn, c.stub, c.admin = endpoint, conn, dlsv1.NewLockServiceClient(conn), dlsv1.NewAdminServiceClient(conn)
}

func (c *connection) client() dlsv1.LockServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stub
}

func (c *connection) adminClient() dlsv1.AdminServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admin
}

// outcome is what a call ended with: an error code and kind, or success.
type outcome struct {
	code, kind, message string
}

func (o *outcome) String() string {
	if o == nil {
		return "ok"
	}
	return fmt.Sprintf("error %s/%s (%s)", o.code, o.kind, o.message)
}

// retryable says whether err means "not the leader" (follow the hint) or "no leader yet"
// (back off), and switches the connection accordingly.
func (c *connection) retryable(err error, md metadata.MD, deadline time.Time) bool {
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable || time.Now().After(deadline) {
		return false
	}
	if leader := md.Get("x-dls-leader-addr"); len(leader) > 0 && leader[0] != "" {
		c.connect(leader[0])
	} else {
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func toOutcome(err error, md metadata.MD) *outcome {
	st, _ := status.FromError(err)
	o := &outcome{code: codeName(st.Code()), message: st.Message()}
	if kind := md.Get("x-dls-error"); len(kind) > 0 {
		o.kind = kind[0]
	}
	return o
}

// codeNames are the canonical gRPC status code names, as the scenario file spells them
// (grpc-go's String() gives "DeadlineExceeded" and the US spelling "Canceled").
var codeNames = []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return c.String()
}

// unary calls fn with retries across leader changes; fn gets the stub and a trailer sink.
func unary[T any](c *connection, fn func(ctx context.Context, stub dlsv1.LockServiceClient, opts ...grpc.CallOption) (T, error)) (T, *outcome) {
	return unaryOn(c, (*connection).client, fn)
}

// adminUnary is unary on the AdminService (the operator calls).
func adminUnary[T any](c *connection, fn func(ctx context.Context, stub dlsv1.AdminServiceClient, opts ...grpc.CallOption) (T, error)) (T, *outcome) {
	return unaryOn(c, (*connection).adminClient, fn)
}

func unaryOn[S, T any](c *connection, stub func(*connection) S, fn func(ctx context.Context, stub S, opts ...grpc.CallOption) (T, error)) (T, *outcome) {
	deadline := time.Now().Add(patience)
	for {
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), c.md), patience)
		var trailer metadata.MD
		v, err := fn(ctx, stub(c), grpc.Trailer(&trailer))
		cancel()
		if err == nil {
			return v, nil
		}
		if c.retryable(err, trailer, deadline) {
			continue
		}
		var zero T
		return zero, toOutcome(err, trailer)
	}
}

// grant is what an acquire stream ended with: the lock of AcquireLock (one), or every
// lock of AcquireLocks in the order asked (all).
type grant struct {
	one *dlsv1.Granted
	all []*dlsv1.Granted
}

// stayOpen is a granted stay_open acquire stream, read on in the background until it ends:
// the `lost` message if one came, and the status it ended with.
type stayOpen struct {
	mu     sync.Mutex
	lost   *dlsv1.LockStreamLost
	ended  string // "" while open, then "OK" or the error
	extra  int    // other messages after the grant
	cancel context.CancelFunc
}

func (so *stayOpen) state() (*dlsv1.LockStreamLost, string, int) {
	so.mu.Lock()
	defer so.mu.Unlock()
	return so.lost, so.ended, so.extra
}

// acquire follows an AcquireLock stream to its grant or final status; a stay_open stream
// is handed to onStayOpen after its grant.
func (c *connection) acquire(req *dlsv1.AcquireLockRequest, onQueued func(*dlsv1.Queued), onStayOpen func(*stayOpen)) (*grant, *outcome) {
	open := func(ctx context.Context, stub dlsv1.LockServiceClient) (grpc.ServerStreamingClient[dlsv1.AcquireLockResponse], error) {
		return stub.AcquireLock(ctx, req)
	}
	read := func(m *dlsv1.AcquireLockResponse) (*dlsv1.Queued, *grant) {
		if g := m.GetGranted(); g != nil {
			return nil, &grant{one: g}
		}
		return m.GetQueued(), nil
	}
	if !req.StayOpen {
		onStayOpen = nil
	}
	return follow(c, req.TimeoutMs, open, read, onQueued, (*dlsv1.AcquireLockResponse).GetLost, onStayOpen)
}

// acquireAll follows an AcquireLocks stream to its grants or final status.
func (c *connection) acquireAll(req *dlsv1.AcquireLocksRequest, onQueued func(*dlsv1.Queued), onStayOpen func(*stayOpen)) (*grant, *outcome) {
	open := func(ctx context.Context, stub dlsv1.LockServiceClient) (grpc.ServerStreamingClient[dlsv1.AcquireLocksResponse], error) {
		return stub.AcquireLocks(ctx, req)
	}
	read := func(m *dlsv1.AcquireLocksResponse) (*dlsv1.Queued, *grant) {
		if g := m.GetGranted(); g != nil {
			return nil, &grant{all: g.Locks}
		}
		return m.GetQueued(), nil
	}
	if !req.StayOpen {
		onStayOpen = nil
	}
	return follow(c, req.TimeoutMs, open, read, onQueued, (*dlsv1.AcquireLocksResponse).GetLost, onStayOpen)
}

// follow reads an acquire stream (opened by open, each message split by read into a queued
// position or the grant) to its grant or final status, re-attaching with the same request
// (same request_id) when the serving node stops leading.
func follow[M any](c *connection, timeoutMs int64,
	open func(context.Context, dlsv1.LockServiceClient) (grpc.ServerStreamingClient[M], error),
	read func(*M) (*dlsv1.Queued, *grant), onQueued func(*dlsv1.Queued),
	lostOf func(*M) *dlsv1.LockStreamLost, onStayOpen func(*stayOpen)) (*grant, *outcome) {
	deadline := time.Now().Add(time.Duration(timeoutMs)*time.Millisecond + patience)
	for {
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), c.md))
		stream, err := open(ctx, c.client())
		var trailer metadata.MD
		var granted *grant
		for err == nil {
			var msg *M
			msg, err = stream.Recv()
			if err != nil {
				trailer = stream.Trailer()
				break
			}
			if q, g := read(msg); q != nil {
				onQueued(q)
			} else if g != nil {
				granted = g
				break
			}
		}
		if granted != nil && onStayOpen != nil {
			so := &stayOpen{cancel: cancel}
			go func() {
				for {
					msg, err := stream.Recv()
					so.mu.Lock()
					if err != nil {
						so.ended = "OK"
						if !errors.Is(err, io.EOF) {
							so.ended = toOutcome(err, stream.Trailer()).String()
						}
						so.mu.Unlock()
						return
					}
					if l := lostOf(msg); l != nil {
						so.lost = l
					} else {
						so.extra++
					}
					so.mu.Unlock()
				}
			}()
			onStayOpen(so)
			return granted, nil
		}
		cancel()
		if granted != nil {
			return granted, nil
		}
		if errors.Is(err, io.EOF) {
			return nil, &outcome{code: "UNKNOWN", message: "stream ended without a grant or a status"}
		}
		if c.retryable(err, trailer, deadline) {
			continue
		}
		return nil, toOutcome(err, trailer)
	}
}

// background is an acquire (or acquire_all: op) started with "wait": false.
type background struct {
	op       string
	mu       sync.Mutex
	queued   []*dlsv1.Queued
	consumed int
	done     bool
	granted  *grant
	failure  *outcome
	finished chan struct{}
}

// startBackground runs acquire (a stream follower given the queued-message sink) in a goroutine.
func startBackground(op string, acquire func(onQueued func(*dlsv1.Queued)) (*grant, *outcome)) *background {
	b := &background{op: op, finished: make(chan struct{})}
	go func() {
		g, o := acquire(func(q *dlsv1.Queued) {
			b.mu.Lock()
			b.queued = append(b.queued, q)
			b.mu.Unlock()
		})
		b.mu.Lock()
		b.done, b.granted, b.failure = true, g, o
		b.mu.Unlock()
		close(b.finished)
	}()
	return b
}

func (b *background) queuedAt(position uint32) (*dlsv1.Queued, error) {
	deadline := time.Now().Add(patience)
	for {
		b.mu.Lock()
		for b.consumed < len(b.queued) {
			q := b.queued[b.consumed]
			b.consumed++
			if q.Position == position {
				b.mu.Unlock()
				return q, nil
			}
		}
		var seen []uint32
		for _, q := range b.queued {
			seen = append(seen, q.Position)
		}
		done, g, f := b.done, b.granted, b.failure
		b.mu.Unlock()
		if done {
			how := f.String()
			if g != nil && g.one != nil {
				how = fmt.Sprintf("granted with token %d", g.one.FencingToken)
			} else if g != nil {
				how = fmt.Sprintf("granted %d locks", len(g.all))
			}
			return nil, fmt.Errorf("acquire ended (%s) before queued position %d; positions seen %v", how, position, seen)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no queued position %d within %v; positions seen %v", position, patience, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type scenario struct {
	conn       *connection
	ns         string
	txns       map[string]uint64
	order      []uint64
	tokens     map[string]uint64
	handles    map[string]*background
	watches    map[string]*keyWatch
	cursors    map[string]string
	lostStream map[string]bool // transactions begun with lost_stream: their acquires stay open
	mu         sync.Mutex      // guards streams (background acquires add to it)
	streams    map[string][]*stayOpen
}

// keyWatch is a WatchKey stream read in the background: its messages, and how it ended.
type keyWatch struct {
	mu       sync.Mutex
	messages []*dlsv1.KeyHolders
	consumed int
	ended    string
	cancel   context.CancelFunc
}

func startWatch(c *connection, req *dlsv1.WatchKeyRequest) *keyWatch {
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), c.md))
	w := &keyWatch{cancel: cancel}
	go func() {
		deadline := time.Now().Add(patience)
		for {
			stream, err := c.client().WatchKey(ctx, req)
			var trailer metadata.MD
			for err == nil {
				var msg *dlsv1.KeyHolders
				if msg, err = stream.Recv(); err != nil {
					trailer = stream.Trailer()
					break
				}
				w.mu.Lock()
				w.messages = append(w.messages, msg)
				w.mu.Unlock()
			}
			w.mu.Lock()
			none := len(w.messages) == 0
			w.mu.Unlock()
			if none && !errors.Is(err, io.EOF) && c.retryable(err, trailer, deadline) {
				continue
			}
			ended := "the watch ended (OK)"
			if !errors.Is(err, io.EOF) {
				ended = "the watch ended: " + toOutcome(err, trailer).String()
			}
			w.mu.Lock()
			w.ended = ended
			w.mu.Unlock()
			return
		}
	}()
	return w
}

// next is the watch's next message not yet consumed (waits for it).
func (w *keyWatch) next() (*dlsv1.KeyHolders, error) {
	deadline := time.Now().Add(patience)
	for {
		w.mu.Lock()
		if w.consumed < len(w.messages) {
			m := w.messages[w.consumed]
			w.consumed++
			w.mu.Unlock()
			return m, nil
		}
		ended := w.ended
		w.mu.Unlock()
		if ended != "" {
			return nil, errors.New(ended)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no key watch message within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// onStayOpen keeps a granted stay_open stream of the step's transaction.
func (s *scenario) onStayOpen(step map[string]any) func(*stayOpen) {
	name, _ := step["txn"].(string)
	return func(so *stayOpen) {
		s.mu.Lock()
		s.streams[name] = append(s.streams[name], so)
		s.mu.Unlock()
	}
}

func (s *scenario) txnStreams(step map[string]any) []*stayOpen {
	name, _ := step["txn"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*stayOpen(nil), s.streams[name]...)
}

func changeKind(k dlsv1.KeyChangeKind) string {
	return strings.TrimPrefix(k.String(), "KEY_CHANGE_KIND_")
}

func causeName(c dlsv1.EndCause) string {
	return strings.TrimPrefix(c.String(), "END_CAUSE_")
}

func showHolder(h *dlsv1.KeyHolder) string {
	return fmt.Sprintf("txn %d %q %s#%d", h.TransactionId, h.TransactionName, h.Mode, h.FencingToken)
}

func (s *scenario) checkHolder(what string, w map[string]any, h *dlsv1.KeyHolder) error {
	if n, ok := w["txn"].(string); ok {
		id, known := s.txns[n]
		if !known {
			return fmt.Errorf("no transaction %q", n)
		}
		if err := eq(fmt.Sprintf("%s transaction (want %s)", what, n), h.TransactionId, id); err != nil {
			return err
		}
	}
	if v, ok := w["name"]; ok {
		if err := eq(what+" transaction_name", h.TransactionName, s.text(v)); err != nil {
			return err
		}
	}
	if v, ok := w["mode"]; ok {
		if err := eq(what+" mode", h.Mode.String(), v); err != nil {
			return err
		}
	}
	if v, ok := w["token"]; ok {
		t, err := s.token(v)
		if err != nil {
			return err
		}
		if err := eq(fmt.Sprintf("%s fencing token (want %v)", what, v), h.FencingToken, t); err != nil {
			return err
		}
	}
	return nil
}

// checkWatch compares holders (in order, exactly) and changes (in order, exactly), and saves the cursor.
func (s *scenario) checkWatch(checks map[string]any, holders []*dlsv1.KeyHolder, changes []*dlsv1.KeyChange, cursor string) error {
	var gotH, gotC []string
	for _, h := range holders {
		gotH = append(gotH, showHolder(h))
	}
	for _, c := range changes {
		cause := ""
		if c.EndCause != dlsv1.EndCause_END_CAUSE_UNSPECIFIED {
			cause = " (" + causeName(c.EndCause) + ")"
		}
		gotC = append(gotC, changeKind(c.Kind)+" "+showHolder(c.Holder)+cause)
	}
	err := func() error {
		if want, ok := checks["holders"].([]any); ok {
			if len(want) != len(holders) {
				return fmt.Errorf("holders: expected %d", len(want))
			}
			for i, raw := range want {
				w, _ := raw.(map[string]any)
				if err := s.checkHolder(fmt.Sprintf("holders[%d]", i), w, holders[i]); err != nil {
					return err
				}
			}
		}
		if want, ok := checks["changes"].([]any); ok {
			if len(want) != len(changes) {
				return fmt.Errorf("changes: expected %d", len(want))
			}
			for i, raw := range want {
				w, _ := raw.(map[string]any)
				what := fmt.Sprintf("changes[%d]", i)
				if v, ok := w["kind"]; ok {
					if err := eq(what+" kind", changeKind(changes[i].Kind), v); err != nil {
						return err
					}
				}
				if v, ok := w["end_cause"]; ok {
					if err := eq(what+" end_cause", causeName(changes[i].EndCause), v); err != nil {
						return err
					}
				}
				if err := s.checkHolder(what, w, changes[i].Holder); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("%w; holders %v, changes %v", err, gotH, gotC)
	}
	if n, ok := checks["save_cursor"].(string); ok {
		s.cursors[n] = cursor
	}
	return nil
}

func (s *scenario) watch(step map[string]any) (*keyWatch, error) {
	name, _ := step["handle"].(string)
	w, ok := s.watches[name]
	if !ok {
		return nil, fmt.Errorf("no watch %q", name)
	}
	return w, nil
}

func (s *scenario) expectLost(step map[string]any) error {
	within := time.Duration(num(step, "within_ms", patience.Milliseconds())) * time.Millisecond
	deadline := time.Now().Add(within)
	var lost *dlsv1.LockStreamLost
	for lost == nil {
		streams := s.txnStreams(step)
		if len(streams) == 0 {
			return errors.New("the transaction has no granted stay_open stream")
		}
		allEnded := true
		var endings []string
		for _, so := range streams {
			l, ended, _ := so.state()
			if l != nil {
				lost = l
			}
			allEnded = allEnded && ended != ""
			endings = append(endings, ended)
		}
		if lost != nil {
			break
		}
		if allEnded {
			return fmt.Errorf("every stay_open stream ended without lost: %v", endings)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no lost message within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checks, err := checkOutcome(step, nil)
	if err != nil || checks == nil {
		return err
	}
	id, err := s.txnID(step)
	if err != nil {
		return err
	}
	if err := eq("lost.transaction_id", lost.TransactionId, id); err != nil {
		return err
	}
	if v, ok := checks["end_cause"]; ok {
		return eq("lost.end_cause", causeName(lost.EndCause), v)
	}
	return nil
}

func (s *scenario) expectStreamsClosed(step map[string]any) error {
	streams := s.txnStreams(step)
	if len(streams) == 0 {
		return errors.New("the transaction has no granted stay_open stream")
	}
	deadline := time.Now().Add(patience)
	for i, so := range streams {
		for {
			lost, ended, extra := so.state()
			if ended == "" {
				if time.Now().After(deadline) {
					return fmt.Errorf("stay_open stream %d is still open after %v", i, patience)
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if lost != nil {
				return fmt.Errorf("stay_open stream %d sent lost (%s)", i, causeName(lost.EndCause))
			}
			if extra > 0 {
				return fmt.Errorf("stay_open stream %d sent %d other messages after its grant", i, extra)
			}
			if ended != "OK" {
				return fmt.Errorf("stay_open stream %d ended with %s", i, ended)
			}
			break
		}
	}
	return nil
}

func (s *scenario) run(sc map[string]any) error {
	steps, _ := sc["steps"].([]any)
	var failure error
	for i, raw := range steps {
		step, _ := raw.(map[string]any)
		if err := s.step(step); err != nil {
			failure = fmt.Errorf("step %d (%v): %w", i+1, step["op"], err)
			break
		}
	}
	// End whatever the scenario left open, so a failure does not hold locks.
	for _, id := range s.order {
		unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, o ...grpc.CallOption) (*dlsv1.EndTransactionResponse, error) {
			return c.EndTransaction(ctx, &dlsv1.EndTransactionRequest{TransactionId: id}, o...)
		})
	}
	for _, w := range s.watches {
		w.cancel()
	}
	s.mu.Lock()
	for _, streams := range s.streams {
		for _, so := range streams {
			so.cancel()
		}
	}
	s.mu.Unlock()
	return failure
}

// ---- reading step fields ------------------------------------------------------------

func (s *scenario) text(v any) string {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, "${ns}", s.ns)
	case map[string]any:
		n, _ := t["times"].(json.Number).Int64()
		return strings.Repeat(s.text(t["repeat"]), int(n))
	}
	return ""
}

func (s *scenario) field(step map[string]any, name, def string) string {
	if v, ok := step[name]; ok {
		return s.text(v)
	}
	return s.text(def)
}

func num(step map[string]any, name string, def int64) int64 {
	if v, ok := step[name].(json.Number); ok {
		n, _ := v.Int64()
		return n
	}
	return def
}

func (s *scenario) txnID(step map[string]any) (uint64, error) {
	if v, ok := step["txn_id"].(json.Number); ok {
		n, _ := v.Int64()
		return uint64(n), nil
	}
	name, _ := step["txn"].(string)
	id, ok := s.txns[name]
	if !ok {
		return 0, fmt.Errorf("transaction %q was not begun", name)
	}
	return id, nil
}

// requestID is the step's, or a fresh one: a raw client picks its own so retries stay safe.
func (s *scenario) requestID(step map[string]any) string {
	if _, ok := step["request_id"]; ok {
		return s.field(step, "request_id", "")
	}
	return fmt.Sprintf("%s-%d", s.ns, time.Now().UnixNano())
}

func mode(step map[string]any) dlsv1.LockMode {
	switch m := step["mode"].(type) {
	case string:
		return dlsv1.LockMode(dlsv1.LockMode_value[m])
	case json.Number:
		n, _ := m.Int64()
		return dlsv1.LockMode(n)
	}
	return dlsv1.LockMode_EXCLUSIVE
}

func (s *scenario) token(name any) (uint64, error) {
	n, _ := name.(string)
	t, ok := s.tokens[n]
	if !ok {
		return 0, fmt.Errorf("no saved token %q", n)
	}
	return t, nil
}

// ---- expectations ---------------------------------------------------------------------

// checkOutcome compares success or failure with `expect`; it returns the ok checks, or nil
// when an expected error happened.
func checkOutcome(step map[string]any, o *outcome) (map[string]any, error) {
	expect, _ := step["expect"].(map[string]any)
	if want, ok := expect["error"].(map[string]any); ok {
		if o == nil {
			return nil, fmt.Errorf("expected error %v/%v, got ok", want["code"], want["kind"])
		}
		if o.code != want["code"] || o.kind != want["kind"] {
			return nil, fmt.Errorf("expected error %v/%v, got %s", want["code"], want["kind"], o)
		}
		if words, ok := want["message_contains"].(string); ok && !strings.Contains(o.message, words) {
			return nil, fmt.Errorf("expected error %v/%v saying %q, got %s", want["code"], want["kind"], words, o)
		}
		return nil, nil
	}
	if o != nil {
		return nil, fmt.Errorf("expected ok, got %s", o)
	}
	checks, _ := expect["ok"].(map[string]any)
	if checks == nil {
		checks = map[string]any{}
	}
	return checks, nil
}

func eq(what string, got, want any) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s: expected %v, got %v", what, want, got)
	}
	return nil
}

// checkAcquired compares the outcome of an acquire (op "acquire") or acquire_all with `expect`.
func (s *scenario) checkAcquired(step map[string]any, op string, g *grant, o *outcome) error {
	checks, err := checkOutcome(step, o)
	if err != nil || checks == nil {
		return err
	}
	if op == "acquire_all" {
		return s.checkGrants(checks, g.all)
	}
	return s.checkGrant(checks, g.one)
}

// checkGrants compares the grants of acquire_all, in the order asked, with the `locks` check;
// each entry's saved token is stored before the next entry is checked.
func (s *scenario) checkGrants(checks map[string]any, grants []*dlsv1.Granted) error {
	want, ok := checks["locks"].([]any)
	if !ok {
		return nil
	}
	var got []string
	for _, g := range grants {
		got = append(got, fmt.Sprintf("%s:%s#%d", g.Key, g.Mode, g.FencingToken))
	}
	if len(want) != len(grants) {
		return fmt.Errorf("locks: expected %d grants, got %v", len(want), got)
	}
	for i, raw := range want {
		w, _ := raw.(map[string]any)
		g := grants[i]
		if err := eq(fmt.Sprintf("locks[%d] lock", i), g.Namespace+"/"+g.Key, s.field(w, "namespace", "${ns}")+"/"+s.text(w["key"])); err != nil {
			return err
		}
		if err := s.checkGrant(w, g); err != nil {
			return fmt.Errorf("locks[%d]: %w", i, err)
		}
	}
	return nil
}

// grantChecks are the ok checks made on a granted lock.
var grantChecks = []string{"mode", "token_equals", "token_greater_than", "save_token"}

// checkGrant makes the grant checks (mode, tokens) of an acquire, a downgrade or one
// entry of acquire_all's `locks` on one granted lock.
func (s *scenario) checkGrant(checks map[string]any, g *dlsv1.Granted) error {
	if m, ok := checks["mode"]; ok {
		if err := eq("mode", g.Mode.String(), m); err != nil {
			return err
		}
	}
	if n, ok := checks["token_equals"]; ok {
		t, err := s.token(n)
		if err != nil {
			return err
		}
		if err := eq("fencing token", g.FencingToken, t); err != nil {
			return err
		}
	}
	if n, ok := checks["token_greater_than"]; ok {
		t, err := s.token(n)
		if err != nil {
			return err
		}
		if g.FencingToken <= t {
			return fmt.Errorf("fencing token %d is not greater than %v=%d", g.FencingToken, n, t)
		}
	}
	if n, ok := checks["save_token"].(string); ok {
		s.tokens[n] = g.FencingToken
	}
	return nil
}

func (s *scenario) checkVerify(checks map[string]any, v *dlsv1.VerifyFencingTokenResponse) error {
	if want, ok := checks["current"]; ok {
		if err := eq("current", v.Current, want); err != nil {
			return err
		}
	}
	if names, ok := checks["current_tokens"].([]any); ok {
		var want []uint64
		for _, n := range names {
			t, err := s.token(n)
			if err != nil {
				return err
			}
			want = append(want, t)
		}
		got := append([]uint64(nil), v.CurrentTokens...)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		// Sorted, so the holders compare as a set.
		return eq("current_tokens", got, want)
	}
	return nil
}

// awaitStatus polls GetTransactionStatus until the step's ok checks hold, heartbeating
// first when the step says so; an ended transaction no longer changes, so a mismatch then
// fails.
func (s *scenario) awaitStatus(step map[string]any) error {
	id, err := s.txnID(step)
	if err != nil {
		return err
	}
	expect, _ := step["expect"].(map[string]any)
	checks, _ := expect["ok"].(map[string]any)
	heartbeat, _ := step["heartbeat"].(bool)
	deadline := time.Now().Add(time.Duration(num(step, "within_ms", patience.Milliseconds())) * time.Millisecond)
	for {
		if heartbeat {
			unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.HeartbeatResponse, error) {
				return c.Heartbeat(ctx, &dlsv1.HeartbeatRequest{TransactionId: id}, opts...)
			})
		}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.GetTransactionStatusResponse, error) {
			return c.GetTransactionStatus(ctx, &dlsv1.GetTransactionStatusRequest{TransactionId: id}, opts...)
		})
		if o != nil {
			return fmt.Errorf("status: %s", o)
		}
		err := s.checkStatus(checks, resp)
		if err == nil {
			return nil
		}
		if resp.State != dlsv1.TransactionState_ACTIVE || time.Now().After(deadline) {
			return fmt.Errorf("%v (state %s)", err, resp.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *scenario) checkStatus(checks map[string]any, st *dlsv1.GetTransactionStatusResponse) error {
	if v, ok := checks["state"]; ok {
		if err := eq("state", st.State.String(), v); err != nil {
			return err
		}
	}
	if v, ok := checks["name"]; ok {
		if err := eq("name", st.Name, s.text(v)); err != nil {
			return err
		}
	}
	if v, ok := checks["priority"]; ok {
		if err := eq("priority", st.Priority, v); err != nil {
			return err
		}
	}
	if v, ok := checks["lease_timeout_ms"]; ok {
		if err := eq("lease_timeout_ms", st.LeaseTimeoutMs, v); err != nil {
			return err
		}
	}
	if v, ok := checks["end_cause"].(string); ok {
		if got := strings.TrimPrefix(st.EndCause.String(), "END_CAUSE_"); got != v {
			return fmt.Errorf("end_cause: got %s, want %s", got, v)
		}
	}
	if want, ok := checks["locks"].([]any); ok {
		var got []string
		unmatched := map[int]bool{}
		for i, l := range st.Locks {
			got = append(got, fmt.Sprintf("%s:%s#%d", l.Key, l.Mode, l.FencingToken))
			unmatched[i] = true
		}
		sort.Strings(got)
		for _, raw := range want {
			w, _ := raw.(map[string]any)
			ns, key, m := s.field(w, "namespace", "${ns}"), s.text(w["key"]), fmt.Sprint(w["mode"])
			var token *uint64
			if n, ok := w["token"]; ok {
				t, err := s.token(n)
				if err != nil {
					return err
				}
				token = &t
			}
			hit := -1
			for i, l := range st.Locks {
				if unmatched[i] && l.Namespace == ns && l.Key == key && l.Mode.String() == m && (token == nil || *token == l.FencingToken) {
					hit = i
					break
				}
			}
			if hit < 0 {
				return fmt.Errorf("locks: no %s:%s in %v", key, m, got)
			}
			delete(unmatched, hit)
		}
		if len(unmatched) > 0 {
			return fmt.Errorf("locks: %d unexpected in %v", len(unmatched), got)
		}
	}
	if w, ok := checks["waiting"]; ok {
		p := st.Waiting
		if w == nil {
			if p != nil {
				return fmt.Errorf("expected no pending wait, got %s:%s at %d", p.Key, p.Mode, p.Position)
			}
		} else {
			wm, _ := w.(map[string]any)
			if p == nil {
				return errors.New("expected a pending wait, got none")
			}
			if err := eq("waiting.key", p.Key, s.text(wm["key"])); err != nil {
				return err
			}
			if err := eq("waiting.namespace", p.Namespace, s.field(wm, "namespace", "${ns}")); err != nil {
				return err
			}
			if m, ok := wm["mode"]; ok {
				if err := eq("waiting.mode", p.Mode.String(), m); err != nil {
					return err
				}
			}
			if pos, ok := wm["position"]; ok {
				if err := eq("waiting.position", p.Position, pos); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ---- steps ----------------------------------------------------------------------------

func (s *scenario) step(step map[string]any) error {
	op, _ := step["op"].(string)
	switch op {
	case "begin":
		req := &dlsv1.BeginTransactionRequest{TimeoutMs: num(step, "timeout_ms", 15000),
			Priority: int32(num(step, "priority", 0)), Name: s.field(step, "name", ""), RequestId: s.requestID(step),
			MaxDurationMs: num(step, "max_duration_ms", 0)}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.BeginTransactionResponse, error) {
			return c.BeginTransaction(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		name, _ := step["txn"].(string)
		s.txns[name] = resp.TransactionId
		s.order = append(s.order, resp.TransactionId)
		if v, _ := step["lost_stream"].(bool); v {
			s.lostStream[name] = true
		}
		if v, ok := checks["lease_timeout_ms"]; ok {
			if err := eq("lease_timeout_ms", resp.LeaseTimeoutMs, v); err != nil {
				return err
			}
		}
		if v, ok := checks["same_txn_as"].(string); ok {
			return eq("transaction id", resp.TransactionId, s.txns[v])
		}
	case "acquire":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		req := &dlsv1.AcquireLockRequest{TransactionId: id, Namespace: s.field(step, "namespace", "${ns}"),
			Key: s.field(step, "key", ""), Mode: mode(step), TimeoutMs: num(step, "timeout_ms", 10000),
			RequestId: s.requestID(step), StayOpen: s.staysOpen(step), Permits: uint32(num(step, "permits", 0))}
		if wait, ok := step["wait"].(bool); ok && !wait {
			h, _ := step["handle"].(string)
			s.handles[h] = startBackground(op, func(q func(*dlsv1.Queued)) (*grant, *outcome) {
				return s.conn.acquire(req, q, s.onStayOpen(step))
			})
			return nil
		}
		g, o := s.conn.acquire(req, func(*dlsv1.Queued) {}, s.onStayOpen(step))
		return s.checkAcquired(step, op, g, o)
	case "acquire_all":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		req := &dlsv1.AcquireLocksRequest{TransactionId: id, TimeoutMs: num(step, "timeout_ms", 10000), RequestId: s.requestID(step),
			StayOpen: s.staysOpen(step)}
		wanted, _ := step["locks"].([]any)
		for _, raw := range wanted {
			w, _ := raw.(map[string]any)
			req.Locks = append(req.Locks, &dlsv1.LockRequest{Namespace: s.field(w, "namespace", "${ns}"), Key: s.field(w, "key", ""), Mode: mode(w)})
		}
		if wait, ok := step["wait"].(bool); ok && !wait {
			h, _ := step["handle"].(string)
			s.handles[h] = startBackground(op, func(q func(*dlsv1.Queued)) (*grant, *outcome) {
				return s.conn.acquireAll(req, q, s.onStayOpen(step))
			})
			return nil
		}
		g, o := s.conn.acquireAll(req, func(*dlsv1.Queued) {}, s.onStayOpen(step))
		return s.checkAcquired(step, op, g, o)
	case "expect_queued":
		b, err := s.handle(step)
		if err != nil {
			return err
		}
		q, err := b.queuedAt(uint32(num(step, "position", 0)))
		if err != nil {
			return err
		}
		blocked, _ := step["blocked_by"].([]any)
		for _, n := range blocked {
			id := s.txns[fmt.Sprint(n)]
			found := false
			for _, t := range q.BlockingTransactionIds {
				found = found || t == id
			}
			if !found {
				return fmt.Errorf("queued at %d but not blocked by %v (%d); blockers %v", q.Position, n, id, q.BlockingTransactionIds)
			}
		}
	case "await":
		b, err := s.handle(step)
		if err != nil {
			return err
		}
		select {
		case <-b.finished:
		case <-time.After(time.Hour + patience):
			return errors.New("background acquire did not finish")
		}
		return s.checkAcquired(step, b.op, b.granted, b.failure)
	case "release":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		req := &dlsv1.ReleaseLockRequest{TransactionId: id, Namespace: s.field(step, "namespace", "${ns}"),
			Key: s.field(step, "key", ""), RequestId: s.requestID(step)}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.ReleaseLockResponse, error) {
			return c.ReleaseLock(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["released"]; ok {
			return eq("released", resp.Released, v)
		}
	case "downgrade":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		req := &dlsv1.DowngradeLockRequest{TransactionId: id, Namespace: s.field(step, "namespace", "${ns}"),
			Key: s.field(step, "key", ""), RequestId: s.requestID(step)}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.DowngradeLockResponse, error) {
			return c.DowngradeLock(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["held"]; ok {
			if err := eq("held", resp.Held, v); err != nil {
				return err
			}
		}
		if !resp.Held {
			// Grant checks on a lock that is not held cannot pass.
			for _, c := range grantChecks {
				if _, ok := checks[c]; ok {
					return fmt.Errorf("%s: the lock is not held (held=false)", c)
				}
			}
			return nil
		}
		return s.checkGrant(checks, resp.Lock)
	case "verify_token":
		req := &dlsv1.VerifyFencingTokenRequest{Namespace: s.field(step, "namespace", "${ns}"), Key: s.field(step, "key", "")}
		switch t := step["token"].(type) {
		case string:
			token, err := s.token(t)
			if err != nil {
				return err
			}
			req.FencingToken = token
		case json.Number:
			n, _ := t.Int64()
			req.FencingToken = uint64(n)
		default:
			return fmt.Errorf("token %v is neither a saved token name nor a number", step["token"])
		}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.VerifyFencingTokenResponse, error) {
			return c.VerifyFencingToken(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		return s.checkVerify(checks, resp)
	case "status":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.GetTransactionStatusResponse, error) {
			return c.GetTransactionStatus(ctx, &dlsv1.GetTransactionStatusRequest{TransactionId: id}, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		return s.checkStatus(checks, resp)
	case "heartbeat":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.HeartbeatResponse, error) {
			return c.Heartbeat(ctx, &dlsv1.HeartbeatRequest{TransactionId: id}, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, _ := checks["lease_remaining_positive"].(bool); v && resp.LeaseRemainingMs <= 0 {
			return fmt.Errorf("lease_remaining_ms is %d", resp.LeaseRemainingMs)
		}
	case "end":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		commit := true
		if v, ok := step["commit"].(bool); ok {
			commit = v
		}
		req := &dlsv1.EndTransactionRequest{TransactionId: id, Commit: commit, RequestId: s.requestID(step)}
		resp, o := unary(s.conn, func(ctx context.Context, c dlsv1.LockServiceClient, opts ...grpc.CallOption) (*dlsv1.EndTransactionResponse, error) {
			return c.EndTransaction(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["state"]; ok {
			if err := eq("state", resp.State.String(), v); err != nil {
				return err
			}
		}
		if v, ok := checks["released_locks"]; ok {
			return eq("released_locks", resp.ReleasedLocks, v)
		}
	case "await_status":
		return s.awaitStatus(step)
	case "sleep_ms":
		time.Sleep(time.Duration(num(step, "ms", 0)) * time.Millisecond)
	case "set_lock_delay":
		req := &dlsv1.SetLockDelayRequest{NamespacePrefix: s.field(step, "namespace_prefix", "${ns}"), DelayMs: num(step, "delay_ms", 0)}
		resp, o := adminUnary(s.conn, func(ctx context.Context, c dlsv1.AdminServiceClient, opts ...grpc.CallOption) (*dlsv1.SetLockDelayResponse, error) {
			return c.SetLockDelay(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["previous_delay_ms"]; ok {
			return eq("previous_delay_ms", resp.PreviousDelayMs, v)
		}
	case "lock_delays":
		resp, o := adminUnary(s.conn, func(ctx context.Context, c dlsv1.AdminServiceClient, opts ...grpc.CallOption) (*dlsv1.ListLockDelaysResponse, error) {
			return c.ListLockDelays(ctx, &dlsv1.ListLockDelaysRequest{}, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if want, ok := checks["rules"].([]any); ok {
			// Only this scenario's rules: other runs may share the server.
			got, exp := []string{}, []string{}
			for _, r := range resp.Rules {
				if strings.HasPrefix(r.NamespacePrefix, s.ns) {
					got = append(got, fmt.Sprintf("%q=%d", r.NamespacePrefix, r.DelayMs))
				}
			}
			for _, raw := range want {
				w, _ := raw.(map[string]any)
				exp = append(exp, fmt.Sprintf("%q=%d", s.field(w, "namespace_prefix", ""), num(w, "delay_ms", 0)))
			}
			return eq("rules", got, exp)
		}
	case "operator_abort":
		id, err := s.txnID(step)
		if err != nil {
			return err
		}
		req := &dlsv1.AbortTransactionRequest{TransactionId: id, Reason: s.field(step, "reason", ""), RequestId: s.requestID(step)}
		resp, o := adminUnary(s.conn, func(ctx context.Context, c dlsv1.AdminServiceClient, opts ...grpc.CallOption) (*dlsv1.AbortTransactionResponse, error) {
			return c.AbortTransaction(ctx, req, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["state"]; ok {
			return eq("state", resp.State.String(), v)
		}
	case "list_key":
		namespace, key := s.field(step, "namespace", "${ns}"), s.field(step, "key", "")
		resp, o := adminUnary(s.conn, func(ctx context.Context, c dlsv1.AdminServiceClient, opts ...grpc.CallOption) (*dlsv1.ListLocksResponse, error) {
			return c.ListLocks(ctx, &dlsv1.ListLocksRequest{NamespacePrefix: namespace}, opts...)
		})
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		var listed *dlsv1.KeyLocks
		for _, k := range resp.Locks {
			if k.Namespace == namespace && k.Key == key {
				listed = k
			}
		}
		return s.checkListed(checks, listed)
	case "watch":
		req := &dlsv1.WatchKeyRequest{Namespace: s.field(step, "namespace", "${ns}"), Key: s.field(step, "key", "")}
		if n, ok := step["resume"].(string); ok {
			c, known := s.cursors[n]
			if !known {
				return fmt.Errorf("no saved cursor %q", n)
			}
			req.Cursor = c
		}
		w := startWatch(s.conn, req)
		h, _ := step["handle"].(string)
		s.watches[h] = w
		first, err := w.next()
		var o *outcome
		if err != nil {
			o = &outcome{code: "WATCH", message: err.Error()}
		}
		checks, err := checkOutcome(step, o)
		if err != nil || checks == nil {
			return err
		}
		if v, ok := checks["initial"]; ok {
			if err := eq("initial", first.Initial, v); err != nil {
				return err
			}
		}
		return s.checkWatch(checks, first.Holders, first.Changes, first.Cursor)
	case "expect_watch":
		w, err := s.watch(step)
		if err != nil {
			return err
		}
		expect, _ := step["expect"].(map[string]any)
		checks, _ := expect["ok"].(map[string]any)
		want, _ := checks["changes"].([]any)
		var changes []*dlsv1.KeyChange
		for {
			msg, err := w.next()
			if err != nil {
				return err
			}
			changes = append(changes, msg.Changes...)
			if len(changes) >= len(want) {
				return s.checkWatch(checks, msg.Holders, changes, msg.Cursor)
			}
		}
	case "unwatch":
		w, err := s.watch(step)
		if err != nil {
			return err
		}
		w.cancel()
		h, _ := step["handle"].(string)
		delete(s.watches, h)
	case "expect_lost":
		return s.expectLost(step)
	case "expect_streams_closed":
		return s.expectStreamsClosed(step)
	default:
		return fmt.Errorf("unknown op %q", op)
	}
	return nil
}

// checkListed makes list_key's checks on the key's ListLocks entry (nil: the key is not
// listed, so it has no holders, waiters or delay).
func (s *scenario) checkListed(checks map[string]any, k *dlsv1.KeyLocks) error {
	if v, ok := checks["listed"]; ok {
		if err := eq("listed", k != nil, v); err != nil {
			return err
		}
	}
	entry := func(what string, w map[string]any, id uint64, m dlsv1.LockMode) error {
		if name, ok := w["txn"]; ok {
			want, err := s.txnID(map[string]any{"txn": name})
			if err != nil {
				return err
			}
			if err := eq(fmt.Sprintf("%s transaction (want %v)", what, name), id, want); err != nil {
				return err
			}
		}
		if v, ok := w["mode"]; ok {
			return eq(what+" mode", m.String(), v)
		}
		return nil
	}
	if want, ok := checks["holders"].([]any); ok {
		hs := k.GetHolders()
		if len(hs) != len(want) {
			return fmt.Errorf("number of holders: expected %d, got %v", len(want), hs)
		}
		for i, raw := range want {
			w, _ := raw.(map[string]any)
			what := fmt.Sprintf("holders[%d]", i)
			if err := entry(what, w, hs[i].TransactionId, hs[i].Mode); err != nil {
				return err
			}
			if name, ok := w["token"]; ok {
				t, err := s.token(name)
				if err != nil {
					return err
				}
				if err := eq(what+" fencing token", hs[i].FencingToken, t); err != nil {
					return err
				}
			}
		}
	}
	if want, ok := checks["waiters"].([]any); ok {
		ws := k.GetWaiters()
		if len(ws) != len(want) {
			return fmt.Errorf("number of waiters: expected %d, got %v", len(want), ws)
		}
		for i, raw := range want {
			w, _ := raw.(map[string]any)
			if err := entry(fmt.Sprintf("waiters[%d]", i), w, ws[i].TransactionId, ws[i].Mode); err != nil {
				return err
			}
		}
	}
	if want, ok := checks["delay"]; ok {
		shown := fmt.Sprintf("until %d ms by txn %d (%s)", k.GetDelayedUntilMs(), k.GetDelayedByTransactionId(), k.GetDelayCause())
		if want == nil {
			if k.GetDelayedUntilMs() != 0 || k.GetDelayedByTransactionId() != 0 {
				return fmt.Errorf("expected no delay, got %s", shown)
			}
			return nil
		}
		if k.GetDelayedUntilMs() <= 0 {
			return fmt.Errorf("expected a delay, got %s", shown)
		}
		w, _ := want.(map[string]any)
		if name, ok := w["txn"]; ok {
			id, err := s.txnID(map[string]any{"txn": name})
			if err != nil {
				return err
			}
			if err := eq(fmt.Sprintf("delay transaction (want %v)", name), k.GetDelayedByTransactionId(), id); err != nil {
				return err
			}
		}
		if v, ok := w["cause"]; ok {
			return eq("delay cause", causeName(k.GetDelayCause()), v)
		}
	}
	return nil
}

func (s *scenario) staysOpen(step map[string]any) bool {
	name, _ := step["txn"].(string)
	return s.lostStream[name]
}

func (s *scenario) handle(step map[string]any) (*background, error) {
	name, _ := step["handle"].(string)
	b, ok := s.handles[name]
	if !ok {
		return nil, fmt.Errorf("no background acquire %q", name)
	}
	return b, nil
}
