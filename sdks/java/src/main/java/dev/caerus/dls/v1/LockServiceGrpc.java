package dev.caerus.dls.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The lock service. All RPCs are served by the raft leader.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class LockServiceGrpc {

  private LockServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "caerus.dls.v1.LockService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.BeginTransactionRequest,
      dev.caerus.dls.v1.BeginTransactionResponse> getBeginTransactionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BeginTransaction",
      requestType = dev.caerus.dls.v1.BeginTransactionRequest.class,
      responseType = dev.caerus.dls.v1.BeginTransactionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.BeginTransactionRequest,
      dev.caerus.dls.v1.BeginTransactionResponse> getBeginTransactionMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.BeginTransactionRequest, dev.caerus.dls.v1.BeginTransactionResponse> getBeginTransactionMethod;
    if ((getBeginTransactionMethod = LockServiceGrpc.getBeginTransactionMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getBeginTransactionMethod = LockServiceGrpc.getBeginTransactionMethod) == null) {
          LockServiceGrpc.getBeginTransactionMethod = getBeginTransactionMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.BeginTransactionRequest, dev.caerus.dls.v1.BeginTransactionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BeginTransaction"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.BeginTransactionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.BeginTransactionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("BeginTransaction"))
              .build();
        }
      }
    }
    return getBeginTransactionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.AcquireLockRequest,
      dev.caerus.dls.v1.AcquireLockResponse> getAcquireLockMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AcquireLock",
      requestType = dev.caerus.dls.v1.AcquireLockRequest.class,
      responseType = dev.caerus.dls.v1.AcquireLockResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.AcquireLockRequest,
      dev.caerus.dls.v1.AcquireLockResponse> getAcquireLockMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.AcquireLockRequest, dev.caerus.dls.v1.AcquireLockResponse> getAcquireLockMethod;
    if ((getAcquireLockMethod = LockServiceGrpc.getAcquireLockMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getAcquireLockMethod = LockServiceGrpc.getAcquireLockMethod) == null) {
          LockServiceGrpc.getAcquireLockMethod = getAcquireLockMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.AcquireLockRequest, dev.caerus.dls.v1.AcquireLockResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AcquireLock"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AcquireLockRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AcquireLockResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("AcquireLock"))
              .build();
        }
      }
    }
    return getAcquireLockMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.ReleaseLockRequest,
      dev.caerus.dls.v1.ReleaseLockResponse> getReleaseLockMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReleaseLock",
      requestType = dev.caerus.dls.v1.ReleaseLockRequest.class,
      responseType = dev.caerus.dls.v1.ReleaseLockResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.ReleaseLockRequest,
      dev.caerus.dls.v1.ReleaseLockResponse> getReleaseLockMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.ReleaseLockRequest, dev.caerus.dls.v1.ReleaseLockResponse> getReleaseLockMethod;
    if ((getReleaseLockMethod = LockServiceGrpc.getReleaseLockMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getReleaseLockMethod = LockServiceGrpc.getReleaseLockMethod) == null) {
          LockServiceGrpc.getReleaseLockMethod = getReleaseLockMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.ReleaseLockRequest, dev.caerus.dls.v1.ReleaseLockResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReleaseLock"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ReleaseLockRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ReleaseLockResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("ReleaseLock"))
              .build();
        }
      }
    }
    return getReleaseLockMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.GetTransactionStatusRequest,
      dev.caerus.dls.v1.GetTransactionStatusResponse> getGetTransactionStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetTransactionStatus",
      requestType = dev.caerus.dls.v1.GetTransactionStatusRequest.class,
      responseType = dev.caerus.dls.v1.GetTransactionStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.GetTransactionStatusRequest,
      dev.caerus.dls.v1.GetTransactionStatusResponse> getGetTransactionStatusMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.GetTransactionStatusRequest, dev.caerus.dls.v1.GetTransactionStatusResponse> getGetTransactionStatusMethod;
    if ((getGetTransactionStatusMethod = LockServiceGrpc.getGetTransactionStatusMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getGetTransactionStatusMethod = LockServiceGrpc.getGetTransactionStatusMethod) == null) {
          LockServiceGrpc.getGetTransactionStatusMethod = getGetTransactionStatusMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.GetTransactionStatusRequest, dev.caerus.dls.v1.GetTransactionStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetTransactionStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.GetTransactionStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.GetTransactionStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("GetTransactionStatus"))
              .build();
        }
      }
    }
    return getGetTransactionStatusMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.HeartbeatRequest,
      dev.caerus.dls.v1.HeartbeatResponse> getHeartbeatMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Heartbeat",
      requestType = dev.caerus.dls.v1.HeartbeatRequest.class,
      responseType = dev.caerus.dls.v1.HeartbeatResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.HeartbeatRequest,
      dev.caerus.dls.v1.HeartbeatResponse> getHeartbeatMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.HeartbeatRequest, dev.caerus.dls.v1.HeartbeatResponse> getHeartbeatMethod;
    if ((getHeartbeatMethod = LockServiceGrpc.getHeartbeatMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getHeartbeatMethod = LockServiceGrpc.getHeartbeatMethod) == null) {
          LockServiceGrpc.getHeartbeatMethod = getHeartbeatMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.HeartbeatRequest, dev.caerus.dls.v1.HeartbeatResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Heartbeat"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.HeartbeatRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.HeartbeatResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("Heartbeat"))
              .build();
        }
      }
    }
    return getHeartbeatMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.EndTransactionRequest,
      dev.caerus.dls.v1.EndTransactionResponse> getEndTransactionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "EndTransaction",
      requestType = dev.caerus.dls.v1.EndTransactionRequest.class,
      responseType = dev.caerus.dls.v1.EndTransactionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.EndTransactionRequest,
      dev.caerus.dls.v1.EndTransactionResponse> getEndTransactionMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.EndTransactionRequest, dev.caerus.dls.v1.EndTransactionResponse> getEndTransactionMethod;
    if ((getEndTransactionMethod = LockServiceGrpc.getEndTransactionMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getEndTransactionMethod = LockServiceGrpc.getEndTransactionMethod) == null) {
          LockServiceGrpc.getEndTransactionMethod = getEndTransactionMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.EndTransactionRequest, dev.caerus.dls.v1.EndTransactionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "EndTransaction"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.EndTransactionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.EndTransactionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("EndTransaction"))
              .build();
        }
      }
    }
    return getEndTransactionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.WatchEventsRequest,
      dev.caerus.dls.v1.Event> getWatchEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WatchEvents",
      requestType = dev.caerus.dls.v1.WatchEventsRequest.class,
      responseType = dev.caerus.dls.v1.Event.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.WatchEventsRequest,
      dev.caerus.dls.v1.Event> getWatchEventsMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.WatchEventsRequest, dev.caerus.dls.v1.Event> getWatchEventsMethod;
    if ((getWatchEventsMethod = LockServiceGrpc.getWatchEventsMethod) == null) {
      synchronized (LockServiceGrpc.class) {
        if ((getWatchEventsMethod = LockServiceGrpc.getWatchEventsMethod) == null) {
          LockServiceGrpc.getWatchEventsMethod = getWatchEventsMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.WatchEventsRequest, dev.caerus.dls.v1.Event>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WatchEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.WatchEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.Event.getDefaultInstance()))
              .setSchemaDescriptor(new LockServiceMethodDescriptorSupplier("WatchEvents"))
              .build();
        }
      }
    }
    return getWatchEventsMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static LockServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<LockServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<LockServiceStub>() {
        @java.lang.Override
        public LockServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new LockServiceStub(channel, callOptions);
        }
      };
    return LockServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static LockServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<LockServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<LockServiceBlockingV2Stub>() {
        @java.lang.Override
        public LockServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new LockServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return LockServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static LockServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<LockServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<LockServiceBlockingStub>() {
        @java.lang.Override
        public LockServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new LockServiceBlockingStub(channel, callOptions);
        }
      };
    return LockServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static LockServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<LockServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<LockServiceFutureStub>() {
        @java.lang.Override
        public LockServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new LockServiceFutureStub(channel, callOptions);
        }
      };
    return LockServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Starts a transaction with a lease of `timeout_ms`. Retry-safe with request_id.
     * RESOURCE_EXHAUSTED when the API key already has its maximum of active transactions.
     * </pre>
     */
    default void beginTransaction(dev.caerus.dls.v1.BeginTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.BeginTransactionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBeginTransactionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Asks for a lock inside an active transaction and streams progress: zero or more
     * `queued` messages while the request waits (sent when the position changes, at most
     * every 100 ms: the latest position), then
     * exactly one `granted` message carrying the fencing token, after which the stream ends.
     * The stream instead ends with a status:
     *   DEADLINE_EXCEEDED    the acquire timeout passed; the transaction stays ACTIVE
     *                        (x-dls-error LOCK_TIMEOUT)
     *   ABORTED              the transaction ended while waiting: lease expired, aborted,
     *                        or chosen as a deadlock victim (x-dls-error TRANSACTION_LOST
     *                        or DEADLOCK_VICTIM); the message says which
     *   CANCELLED            the wait was withdrawn by ReleaseLock on the same key
     *   FAILED_PRECONDITION  the transaction is not active, or already waits for another lock
     *   NOT_FOUND            unknown transaction
     *   INVALID_ARGUMENT     bad namespace, key, mode, timeout or request_id
     *   RESOURCE_EXHAUSTED   the transaction holds its maximum of locks, or the lock's queue
     *                        is full (nothing was queued)
     *   UNAUTHENTICATED / PERMISSION_DENIED
     * A broken stream does not cancel the wait: call again with the same request_id to
     * re-attach and get the same outcome (the current position, or the grant and its token).
     * Re-acquiring a lock the transaction already holds returns the existing grant and
     * token at once. Asking EXCLUSIVE while holding SHARED_READ is an upgrade: it waits to
     * be the sole holder, ahead of other waiters, and is granted with a new token.
     * </pre>
     */
    default void acquireLock(dev.caerus.dls.v1.AcquireLockRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AcquireLockResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAcquireLockMethod(), responseObserver);
    }

    /**
     * <pre>
     * Releases one lock held by the transaction, and grants it onward. Releasing a lock the
     * transaction does not hold is not an error (released = false). If the transaction is
     * still waiting for that key, the wait is withdrawn (its stream ends with CANCELLED).
     * </pre>
     */
    default void releaseLock(dev.caerus.dls.v1.ReleaseLockRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ReleaseLockResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReleaseLockMethod(), responseObserver);
    }

    /**
     * <pre>
     * Reads a transaction's state, its held locks and its pending wait. Linearizable:
     * served by the leader after confirming its leadership. Finished transactions are
     * remembered for a retention window (10 minutes by default), then NOT_FOUND.
     * </pre>
     */
    default void getTransactionStatus(dev.caerus.dls.v1.GetTransactionStatusRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.GetTransactionStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetTransactionStatusMethod(), responseObserver);
    }

    /**
     * <pre>
     * Renews the transaction's lease to its full timeout. Acknowledged only while the
     * serving node's leadership is confirmed by a quorum, so a deposed leader cannot keep
     * a lease alive. FAILED_PRECONDITION (x-dls-error TRANSACTION_LOST) once the
     * transaction is no longer active: stop the work its locks protected.
     * </pre>
     */
    default void heartbeat(dev.caerus.dls.v1.HeartbeatRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.HeartbeatResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getHeartbeatMethod(), responseObserver);
    }

    /**
     * <pre>
     * Commits or aborts the transaction and releases every lock it holds (a pending wait is
     * withdrawn). Retry-safe with request_id. FAILED_PRECONDITION if it already ended
     * (the message names its state).
     * </pre>
     */
    default void endTransaction(dev.caerus.dls.v1.EndTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.EndTransactionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getEndTransactionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams the replicated event log (deadlocks resolved, expiries, operator aborts,
     * revoked locks) from a cursor, then follows new events until the client hangs up.
     * Every event has a sequence number, gap-free and increasing; after a reconnect or a
     * leader change, resume with from_sequence = last seen + 1 and nothing is missed.
     * The log keeps the most recent events only (10,000 by default): a cursor older than
     * that gets OUT_OF_RANGE (x-dls-error CURSOR_EXPIRED) naming the oldest retained one.
     * Events are filtered by namespace for keys limited to namespace prefixes.
     * RESOURCE_EXHAUSTED when the API key or the connection has its maximum of open watches;
     * closing a stream frees its place.
     * </pre>
     */
    default void watchEvents(dev.caerus.dls.v1.WatchEventsRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.Event> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWatchEventsMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service LockService.
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public static abstract class LockServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return LockServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service LockService.
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public static final class LockServiceStub
      extends io.grpc.stub.AbstractAsyncStub<LockServiceStub> {
    private LockServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected LockServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new LockServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Starts a transaction with a lease of `timeout_ms`. Retry-safe with request_id.
     * RESOURCE_EXHAUSTED when the API key already has its maximum of active transactions.
     * </pre>
     */
    public void beginTransaction(dev.caerus.dls.v1.BeginTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.BeginTransactionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBeginTransactionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Asks for a lock inside an active transaction and streams progress: zero or more
     * `queued` messages while the request waits (sent when the position changes, at most
     * every 100 ms: the latest position), then
     * exactly one `granted` message carrying the fencing token, after which the stream ends.
     * The stream instead ends with a status:
     *   DEADLINE_EXCEEDED    the acquire timeout passed; the transaction stays ACTIVE
     *                        (x-dls-error LOCK_TIMEOUT)
     *   ABORTED              the transaction ended while waiting: lease expired, aborted,
     *                        or chosen as a deadlock victim (x-dls-error TRANSACTION_LOST
     *                        or DEADLOCK_VICTIM); the message says which
     *   CANCELLED            the wait was withdrawn by ReleaseLock on the same key
     *   FAILED_PRECONDITION  the transaction is not active, or already waits for another lock
     *   NOT_FOUND            unknown transaction
     *   INVALID_ARGUMENT     bad namespace, key, mode, timeout or request_id
     *   RESOURCE_EXHAUSTED   the transaction holds its maximum of locks, or the lock's queue
     *                        is full (nothing was queued)
     *   UNAUTHENTICATED / PERMISSION_DENIED
     * A broken stream does not cancel the wait: call again with the same request_id to
     * re-attach and get the same outcome (the current position, or the grant and its token).
     * Re-acquiring a lock the transaction already holds returns the existing grant and
     * token at once. Asking EXCLUSIVE while holding SHARED_READ is an upgrade: it waits to
     * be the sole holder, ahead of other waiters, and is granted with a new token.
     * </pre>
     */
    public void acquireLock(dev.caerus.dls.v1.AcquireLockRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AcquireLockResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getAcquireLockMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Releases one lock held by the transaction, and grants it onward. Releasing a lock the
     * transaction does not hold is not an error (released = false). If the transaction is
     * still waiting for that key, the wait is withdrawn (its stream ends with CANCELLED).
     * </pre>
     */
    public void releaseLock(dev.caerus.dls.v1.ReleaseLockRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ReleaseLockResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReleaseLockMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Reads a transaction's state, its held locks and its pending wait. Linearizable:
     * served by the leader after confirming its leadership. Finished transactions are
     * remembered for a retention window (10 minutes by default), then NOT_FOUND.
     * </pre>
     */
    public void getTransactionStatus(dev.caerus.dls.v1.GetTransactionStatusRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.GetTransactionStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetTransactionStatusMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Renews the transaction's lease to its full timeout. Acknowledged only while the
     * serving node's leadership is confirmed by a quorum, so a deposed leader cannot keep
     * a lease alive. FAILED_PRECONDITION (x-dls-error TRANSACTION_LOST) once the
     * transaction is no longer active: stop the work its locks protected.
     * </pre>
     */
    public void heartbeat(dev.caerus.dls.v1.HeartbeatRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.HeartbeatResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getHeartbeatMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Commits or aborts the transaction and releases every lock it holds (a pending wait is
     * withdrawn). Retry-safe with request_id. FAILED_PRECONDITION if it already ended
     * (the message names its state).
     * </pre>
     */
    public void endTransaction(dev.caerus.dls.v1.EndTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.EndTransactionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getEndTransactionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams the replicated event log (deadlocks resolved, expiries, operator aborts,
     * revoked locks) from a cursor, then follows new events until the client hangs up.
     * Every event has a sequence number, gap-free and increasing; after a reconnect or a
     * leader change, resume with from_sequence = last seen + 1 and nothing is missed.
     * The log keeps the most recent events only (10,000 by default): a cursor older than
     * that gets OUT_OF_RANGE (x-dls-error CURSOR_EXPIRED) naming the oldest retained one.
     * Events are filtered by namespace for keys limited to namespace prefixes.
     * RESOURCE_EXHAUSTED when the API key or the connection has its maximum of open watches;
     * closing a stream frees its place.
     * </pre>
     */
    public void watchEvents(dev.caerus.dls.v1.WatchEventsRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.Event> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getWatchEventsMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service LockService.
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public static final class LockServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<LockServiceBlockingV2Stub> {
    private LockServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected LockServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new LockServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Starts a transaction with a lease of `timeout_ms`. Retry-safe with request_id.
     * RESOURCE_EXHAUSTED when the API key already has its maximum of active transactions.
     * </pre>
     */
    public dev.caerus.dls.v1.BeginTransactionResponse beginTransaction(dev.caerus.dls.v1.BeginTransactionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBeginTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Asks for a lock inside an active transaction and streams progress: zero or more
     * `queued` messages while the request waits (sent when the position changes, at most
     * every 100 ms: the latest position), then
     * exactly one `granted` message carrying the fencing token, after which the stream ends.
     * The stream instead ends with a status:
     *   DEADLINE_EXCEEDED    the acquire timeout passed; the transaction stays ACTIVE
     *                        (x-dls-error LOCK_TIMEOUT)
     *   ABORTED              the transaction ended while waiting: lease expired, aborted,
     *                        or chosen as a deadlock victim (x-dls-error TRANSACTION_LOST
     *                        or DEADLOCK_VICTIM); the message says which
     *   CANCELLED            the wait was withdrawn by ReleaseLock on the same key
     *   FAILED_PRECONDITION  the transaction is not active, or already waits for another lock
     *   NOT_FOUND            unknown transaction
     *   INVALID_ARGUMENT     bad namespace, key, mode, timeout or request_id
     *   RESOURCE_EXHAUSTED   the transaction holds its maximum of locks, or the lock's queue
     *                        is full (nothing was queued)
     *   UNAUTHENTICATED / PERMISSION_DENIED
     * A broken stream does not cancel the wait: call again with the same request_id to
     * re-attach and get the same outcome (the current position, or the grant and its token).
     * Re-acquiring a lock the transaction already holds returns the existing grant and
     * token at once. Asking EXCLUSIVE while holding SHARED_READ is an upgrade: it waits to
     * be the sole holder, ahead of other waiters, and is granted with a new token.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.caerus.dls.v1.AcquireLockResponse>
        acquireLock(dev.caerus.dls.v1.AcquireLockRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getAcquireLockMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Releases one lock held by the transaction, and grants it onward. Releasing a lock the
     * transaction does not hold is not an error (released = false). If the transaction is
     * still waiting for that key, the wait is withdrawn (its stream ends with CANCELLED).
     * </pre>
     */
    public dev.caerus.dls.v1.ReleaseLockResponse releaseLock(dev.caerus.dls.v1.ReleaseLockRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReleaseLockMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads a transaction's state, its held locks and its pending wait. Linearizable:
     * served by the leader after confirming its leadership. Finished transactions are
     * remembered for a retention window (10 minutes by default), then NOT_FOUND.
     * </pre>
     */
    public dev.caerus.dls.v1.GetTransactionStatusResponse getTransactionStatus(dev.caerus.dls.v1.GetTransactionStatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetTransactionStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Renews the transaction's lease to its full timeout. Acknowledged only while the
     * serving node's leadership is confirmed by a quorum, so a deposed leader cannot keep
     * a lease alive. FAILED_PRECONDITION (x-dls-error TRANSACTION_LOST) once the
     * transaction is no longer active: stop the work its locks protected.
     * </pre>
     */
    public dev.caerus.dls.v1.HeartbeatResponse heartbeat(dev.caerus.dls.v1.HeartbeatRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getHeartbeatMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Commits or aborts the transaction and releases every lock it holds (a pending wait is
     * withdrawn). Retry-safe with request_id. FAILED_PRECONDITION if it already ended
     * (the message names its state).
     * </pre>
     */
    public dev.caerus.dls.v1.EndTransactionResponse endTransaction(dev.caerus.dls.v1.EndTransactionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getEndTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams the replicated event log (deadlocks resolved, expiries, operator aborts,
     * revoked locks) from a cursor, then follows new events until the client hangs up.
     * Every event has a sequence number, gap-free and increasing; after a reconnect or a
     * leader change, resume with from_sequence = last seen + 1 and nothing is missed.
     * The log keeps the most recent events only (10,000 by default): a cursor older than
     * that gets OUT_OF_RANGE (x-dls-error CURSOR_EXPIRED) naming the oldest retained one.
     * Events are filtered by namespace for keys limited to namespace prefixes.
     * RESOURCE_EXHAUSTED when the API key or the connection has its maximum of open watches;
     * closing a stream frees its place.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.caerus.dls.v1.Event>
        watchEvents(dev.caerus.dls.v1.WatchEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getWatchEventsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service LockService.
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public static final class LockServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<LockServiceBlockingStub> {
    private LockServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected LockServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new LockServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Starts a transaction with a lease of `timeout_ms`. Retry-safe with request_id.
     * RESOURCE_EXHAUSTED when the API key already has its maximum of active transactions.
     * </pre>
     */
    public dev.caerus.dls.v1.BeginTransactionResponse beginTransaction(dev.caerus.dls.v1.BeginTransactionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBeginTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Asks for a lock inside an active transaction and streams progress: zero or more
     * `queued` messages while the request waits (sent when the position changes, at most
     * every 100 ms: the latest position), then
     * exactly one `granted` message carrying the fencing token, after which the stream ends.
     * The stream instead ends with a status:
     *   DEADLINE_EXCEEDED    the acquire timeout passed; the transaction stays ACTIVE
     *                        (x-dls-error LOCK_TIMEOUT)
     *   ABORTED              the transaction ended while waiting: lease expired, aborted,
     *                        or chosen as a deadlock victim (x-dls-error TRANSACTION_LOST
     *                        or DEADLOCK_VICTIM); the message says which
     *   CANCELLED            the wait was withdrawn by ReleaseLock on the same key
     *   FAILED_PRECONDITION  the transaction is not active, or already waits for another lock
     *   NOT_FOUND            unknown transaction
     *   INVALID_ARGUMENT     bad namespace, key, mode, timeout or request_id
     *   RESOURCE_EXHAUSTED   the transaction holds its maximum of locks, or the lock's queue
     *                        is full (nothing was queued)
     *   UNAUTHENTICATED / PERMISSION_DENIED
     * A broken stream does not cancel the wait: call again with the same request_id to
     * re-attach and get the same outcome (the current position, or the grant and its token).
     * Re-acquiring a lock the transaction already holds returns the existing grant and
     * token at once. Asking EXCLUSIVE while holding SHARED_READ is an upgrade: it waits to
     * be the sole holder, ahead of other waiters, and is granted with a new token.
     * </pre>
     */
    public java.util.Iterator<dev.caerus.dls.v1.AcquireLockResponse> acquireLock(
        dev.caerus.dls.v1.AcquireLockRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getAcquireLockMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Releases one lock held by the transaction, and grants it onward. Releasing a lock the
     * transaction does not hold is not an error (released = false). If the transaction is
     * still waiting for that key, the wait is withdrawn (its stream ends with CANCELLED).
     * </pre>
     */
    public dev.caerus.dls.v1.ReleaseLockResponse releaseLock(dev.caerus.dls.v1.ReleaseLockRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReleaseLockMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads a transaction's state, its held locks and its pending wait. Linearizable:
     * served by the leader after confirming its leadership. Finished transactions are
     * remembered for a retention window (10 minutes by default), then NOT_FOUND.
     * </pre>
     */
    public dev.caerus.dls.v1.GetTransactionStatusResponse getTransactionStatus(dev.caerus.dls.v1.GetTransactionStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetTransactionStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Renews the transaction's lease to its full timeout. Acknowledged only while the
     * serving node's leadership is confirmed by a quorum, so a deposed leader cannot keep
     * a lease alive. FAILED_PRECONDITION (x-dls-error TRANSACTION_LOST) once the
     * transaction is no longer active: stop the work its locks protected.
     * </pre>
     */
    public dev.caerus.dls.v1.HeartbeatResponse heartbeat(dev.caerus.dls.v1.HeartbeatRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getHeartbeatMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Commits or aborts the transaction and releases every lock it holds (a pending wait is
     * withdrawn). Retry-safe with request_id. FAILED_PRECONDITION if it already ended
     * (the message names its state).
     * </pre>
     */
    public dev.caerus.dls.v1.EndTransactionResponse endTransaction(dev.caerus.dls.v1.EndTransactionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getEndTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams the replicated event log (deadlocks resolved, expiries, operator aborts,
     * revoked locks) from a cursor, then follows new events until the client hangs up.
     * Every event has a sequence number, gap-free and increasing; after a reconnect or a
     * leader change, resume with from_sequence = last seen + 1 and nothing is missed.
     * The log keeps the most recent events only (10,000 by default): a cursor older than
     * that gets OUT_OF_RANGE (x-dls-error CURSOR_EXPIRED) naming the oldest retained one.
     * Events are filtered by namespace for keys limited to namespace prefixes.
     * RESOURCE_EXHAUSTED when the API key or the connection has its maximum of open watches;
     * closing a stream frees its place.
     * </pre>
     */
    public java.util.Iterator<dev.caerus.dls.v1.Event> watchEvents(
        dev.caerus.dls.v1.WatchEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getWatchEventsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service LockService.
   * <pre>
   * The lock service. All RPCs are served by the raft leader.
   * </pre>
   */
  public static final class LockServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<LockServiceFutureStub> {
    private LockServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected LockServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new LockServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Starts a transaction with a lease of `timeout_ms`. Retry-safe with request_id.
     * RESOURCE_EXHAUSTED when the API key already has its maximum of active transactions.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.BeginTransactionResponse> beginTransaction(
        dev.caerus.dls.v1.BeginTransactionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBeginTransactionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Releases one lock held by the transaction, and grants it onward. Releasing a lock the
     * transaction does not hold is not an error (released = false). If the transaction is
     * still waiting for that key, the wait is withdrawn (its stream ends with CANCELLED).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.ReleaseLockResponse> releaseLock(
        dev.caerus.dls.v1.ReleaseLockRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReleaseLockMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Reads a transaction's state, its held locks and its pending wait. Linearizable:
     * served by the leader after confirming its leadership. Finished transactions are
     * remembered for a retention window (10 minutes by default), then NOT_FOUND.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.GetTransactionStatusResponse> getTransactionStatus(
        dev.caerus.dls.v1.GetTransactionStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetTransactionStatusMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Renews the transaction's lease to its full timeout. Acknowledged only while the
     * serving node's leadership is confirmed by a quorum, so a deposed leader cannot keep
     * a lease alive. FAILED_PRECONDITION (x-dls-error TRANSACTION_LOST) once the
     * transaction is no longer active: stop the work its locks protected.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.HeartbeatResponse> heartbeat(
        dev.caerus.dls.v1.HeartbeatRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getHeartbeatMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Commits or aborts the transaction and releases every lock it holds (a pending wait is
     * withdrawn). Retry-safe with request_id. FAILED_PRECONDITION if it already ended
     * (the message names its state).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.EndTransactionResponse> endTransaction(
        dev.caerus.dls.v1.EndTransactionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getEndTransactionMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_BEGIN_TRANSACTION = 0;
  private static final int METHODID_ACQUIRE_LOCK = 1;
  private static final int METHODID_RELEASE_LOCK = 2;
  private static final int METHODID_GET_TRANSACTION_STATUS = 3;
  private static final int METHODID_HEARTBEAT = 4;
  private static final int METHODID_END_TRANSACTION = 5;
  private static final int METHODID_WATCH_EVENTS = 6;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_BEGIN_TRANSACTION:
          serviceImpl.beginTransaction((dev.caerus.dls.v1.BeginTransactionRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.BeginTransactionResponse>) responseObserver);
          break;
        case METHODID_ACQUIRE_LOCK:
          serviceImpl.acquireLock((dev.caerus.dls.v1.AcquireLockRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AcquireLockResponse>) responseObserver);
          break;
        case METHODID_RELEASE_LOCK:
          serviceImpl.releaseLock((dev.caerus.dls.v1.ReleaseLockRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ReleaseLockResponse>) responseObserver);
          break;
        case METHODID_GET_TRANSACTION_STATUS:
          serviceImpl.getTransactionStatus((dev.caerus.dls.v1.GetTransactionStatusRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.GetTransactionStatusResponse>) responseObserver);
          break;
        case METHODID_HEARTBEAT:
          serviceImpl.heartbeat((dev.caerus.dls.v1.HeartbeatRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.HeartbeatResponse>) responseObserver);
          break;
        case METHODID_END_TRANSACTION:
          serviceImpl.endTransaction((dev.caerus.dls.v1.EndTransactionRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.EndTransactionResponse>) responseObserver);
          break;
        case METHODID_WATCH_EVENTS:
          serviceImpl.watchEvents((dev.caerus.dls.v1.WatchEventsRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.Event>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getBeginTransactionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.BeginTransactionRequest,
              dev.caerus.dls.v1.BeginTransactionResponse>(
                service, METHODID_BEGIN_TRANSACTION)))
        .addMethod(
          getAcquireLockMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.caerus.dls.v1.AcquireLockRequest,
              dev.caerus.dls.v1.AcquireLockResponse>(
                service, METHODID_ACQUIRE_LOCK)))
        .addMethod(
          getReleaseLockMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.ReleaseLockRequest,
              dev.caerus.dls.v1.ReleaseLockResponse>(
                service, METHODID_RELEASE_LOCK)))
        .addMethod(
          getGetTransactionStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.GetTransactionStatusRequest,
              dev.caerus.dls.v1.GetTransactionStatusResponse>(
                service, METHODID_GET_TRANSACTION_STATUS)))
        .addMethod(
          getHeartbeatMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.HeartbeatRequest,
              dev.caerus.dls.v1.HeartbeatResponse>(
                service, METHODID_HEARTBEAT)))
        .addMethod(
          getEndTransactionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.EndTransactionRequest,
              dev.caerus.dls.v1.EndTransactionResponse>(
                service, METHODID_END_TRANSACTION)))
        .addMethod(
          getWatchEventsMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.caerus.dls.v1.WatchEventsRequest,
              dev.caerus.dls.v1.Event>(
                service, METHODID_WATCH_EVENTS)))
        .build();
  }

  private static abstract class LockServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    LockServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.caerus.dls.v1.LockServiceProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("LockService");
    }
  }

  private static final class LockServiceFileDescriptorSupplier
      extends LockServiceBaseDescriptorSupplier {
    LockServiceFileDescriptorSupplier() {}
  }

  private static final class LockServiceMethodDescriptorSupplier
      extends LockServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    LockServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (LockServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new LockServiceFileDescriptorSupplier())
              .addMethod(getBeginTransactionMethod())
              .addMethod(getAcquireLockMethod())
              .addMethod(getReleaseLockMethod())
              .addMethod(getGetTransactionStatusMethod())
              .addMethod(getHeartbeatMethod())
              .addMethod(getEndTransactionMethod())
              .addMethod(getWatchEventsMethod())
              .build();
        }
      }
    }
    return result;
  }
}
