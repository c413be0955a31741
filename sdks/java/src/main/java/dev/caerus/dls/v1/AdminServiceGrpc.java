package dev.caerus.dls.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Operator RPCs.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminServiceGrpc {

  private AdminServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "caerus.dls.v1.AdminService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListLocksRequest,
      dev.caerus.dls.v1.ListLocksResponse> getListLocksMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListLocks",
      requestType = dev.caerus.dls.v1.ListLocksRequest.class,
      responseType = dev.caerus.dls.v1.ListLocksResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListLocksRequest,
      dev.caerus.dls.v1.ListLocksResponse> getListLocksMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListLocksRequest, dev.caerus.dls.v1.ListLocksResponse> getListLocksMethod;
    if ((getListLocksMethod = AdminServiceGrpc.getListLocksMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListLocksMethod = AdminServiceGrpc.getListLocksMethod) == null) {
          AdminServiceGrpc.getListLocksMethod = getListLocksMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.ListLocksRequest, dev.caerus.dls.v1.ListLocksResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListLocks"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ListLocksRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ListLocksResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListLocks"))
              .build();
        }
      }
    }
    return getListLocksMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.AbortTransactionRequest,
      dev.caerus.dls.v1.AbortTransactionResponse> getAbortTransactionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AbortTransaction",
      requestType = dev.caerus.dls.v1.AbortTransactionRequest.class,
      responseType = dev.caerus.dls.v1.AbortTransactionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.AbortTransactionRequest,
      dev.caerus.dls.v1.AbortTransactionResponse> getAbortTransactionMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.AbortTransactionRequest, dev.caerus.dls.v1.AbortTransactionResponse> getAbortTransactionMethod;
    if ((getAbortTransactionMethod = AdminServiceGrpc.getAbortTransactionMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getAbortTransactionMethod = AdminServiceGrpc.getAbortTransactionMethod) == null) {
          AdminServiceGrpc.getAbortTransactionMethod = getAbortTransactionMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.AbortTransactionRequest, dev.caerus.dls.v1.AbortTransactionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AbortTransaction"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AbortTransactionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AbortTransactionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("AbortTransaction"))
              .build();
        }
      }
    }
    return getAbortTransactionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.ClusterStatusRequest,
      dev.caerus.dls.v1.ClusterStatusResponse> getClusterStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ClusterStatus",
      requestType = dev.caerus.dls.v1.ClusterStatusRequest.class,
      responseType = dev.caerus.dls.v1.ClusterStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.ClusterStatusRequest,
      dev.caerus.dls.v1.ClusterStatusResponse> getClusterStatusMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.ClusterStatusRequest, dev.caerus.dls.v1.ClusterStatusResponse> getClusterStatusMethod;
    if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
          AdminServiceGrpc.getClusterStatusMethod = getClusterStatusMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.ClusterStatusRequest, dev.caerus.dls.v1.ClusterStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ClusterStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ClusterStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ClusterStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ClusterStatus"))
              .build();
        }
      }
    }
    return getClusterStatusMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub>() {
        @java.lang.Override
        public AdminServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceStub(channel, callOptions);
        }
      };
    return AdminServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub>() {
        @java.lang.Override
        public AdminServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub>() {
        @java.lang.Override
        public AdminServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingStub(channel, callOptions);
        }
      };
    return AdminServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub>() {
        @java.lang.Override
        public AdminServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceFutureStub(channel, callOptions);
        }
      };
    return AdminServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Lists held and waited-for locks, linearizably (served by the leader).
     * </pre>
     */
    default void listLocks(dev.caerus.dls.v1.ListLocksRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListLocksResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListLocksMethod(), responseObserver);
    }

    /**
     * <pre>
     * Aborts a transaction: releases its locks, ends its waits, emits TRANSACTION_ABORTED.
     * Retry-safe with request_id. FAILED_PRECONDITION if it already ended.
     * </pre>
     */
    default void abortTransaction(dev.caerus.dls.v1.AbortTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AbortTransactionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAbortTransactionMethod(), responseObserver);
    }

    /**
     * <pre>
     * This node's view of the cluster. Served by any node (no leader needed), so each
     * node can be asked on its own.
     * </pre>
     */
    default void clusterStatus(dev.caerus.dls.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClusterStatusMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service AdminService.
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public static abstract class AdminServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service AdminService.
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public static final class AdminServiceStub
      extends io.grpc.stub.AbstractAsyncStub<AdminServiceStub> {
    private AdminServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists held and waited-for locks, linearizably (served by the leader).
     * </pre>
     */
    public void listLocks(dev.caerus.dls.v1.ListLocksRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListLocksResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListLocksMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Aborts a transaction: releases its locks, ends its waits, emits TRANSACTION_ABORTED.
     * Retry-safe with request_id. FAILED_PRECONDITION if it already ended.
     * </pre>
     */
    public void abortTransaction(dev.caerus.dls.v1.AbortTransactionRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AbortTransactionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAbortTransactionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * This node's view of the cluster. Served by any node (no leader needed), so each
     * node can be asked on its own.
     * </pre>
     */
    public void clusterStatus(dev.caerus.dls.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service AdminService.
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public static final class AdminServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingV2Stub> {
    private AdminServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists held and waited-for locks, linearizably (served by the leader).
     * </pre>
     */
    public dev.caerus.dls.v1.ListLocksResponse listLocks(dev.caerus.dls.v1.ListLocksRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListLocksMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Aborts a transaction: releases its locks, ends its waits, emits TRANSACTION_ABORTED.
     * Retry-safe with request_id. FAILED_PRECONDITION if it already ended.
     * </pre>
     */
    public dev.caerus.dls.v1.AbortTransactionResponse abortTransaction(dev.caerus.dls.v1.AbortTransactionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAbortTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * This node's view of the cluster. Served by any node (no leader needed), so each
     * node can be asked on its own.
     * </pre>
     */
    public dev.caerus.dls.v1.ClusterStatusResponse clusterStatus(dev.caerus.dls.v1.ClusterStatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service AdminService.
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public static final class AdminServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingStub> {
    private AdminServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists held and waited-for locks, linearizably (served by the leader).
     * </pre>
     */
    public dev.caerus.dls.v1.ListLocksResponse listLocks(dev.caerus.dls.v1.ListLocksRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListLocksMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Aborts a transaction: releases its locks, ends its waits, emits TRANSACTION_ABORTED.
     * Retry-safe with request_id. FAILED_PRECONDITION if it already ended.
     * </pre>
     */
    public dev.caerus.dls.v1.AbortTransactionResponse abortTransaction(dev.caerus.dls.v1.AbortTransactionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAbortTransactionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * This node's view of the cluster. Served by any node (no leader needed), so each
     * node can be asked on its own.
     * </pre>
     */
    public dev.caerus.dls.v1.ClusterStatusResponse clusterStatus(dev.caerus.dls.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service AdminService.
   * <pre>
   * Operator RPCs.
   * </pre>
   */
  public static final class AdminServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminServiceFutureStub> {
    private AdminServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Lists held and waited-for locks, linearizably (served by the leader).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.ListLocksResponse> listLocks(
        dev.caerus.dls.v1.ListLocksRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListLocksMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Aborts a transaction: releases its locks, ends its waits, emits TRANSACTION_ABORTED.
     * Retry-safe with request_id. FAILED_PRECONDITION if it already ended.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.AbortTransactionResponse> abortTransaction(
        dev.caerus.dls.v1.AbortTransactionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAbortTransactionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * This node's view of the cluster. Served by any node (no leader needed), so each
     * node can be asked on its own.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.ClusterStatusResponse> clusterStatus(
        dev.caerus.dls.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_LOCKS = 0;
  private static final int METHODID_ABORT_TRANSACTION = 1;
  private static final int METHODID_CLUSTER_STATUS = 2;

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
        case METHODID_LIST_LOCKS:
          serviceImpl.listLocks((dev.caerus.dls.v1.ListLocksRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListLocksResponse>) responseObserver);
          break;
        case METHODID_ABORT_TRANSACTION:
          serviceImpl.abortTransaction((dev.caerus.dls.v1.AbortTransactionRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AbortTransactionResponse>) responseObserver);
          break;
        case METHODID_CLUSTER_STATUS:
          serviceImpl.clusterStatus((dev.caerus.dls.v1.ClusterStatusRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ClusterStatusResponse>) responseObserver);
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
          getListLocksMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.ListLocksRequest,
              dev.caerus.dls.v1.ListLocksResponse>(
                service, METHODID_LIST_LOCKS)))
        .addMethod(
          getAbortTransactionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.AbortTransactionRequest,
              dev.caerus.dls.v1.AbortTransactionResponse>(
                service, METHODID_ABORT_TRANSACTION)))
        .addMethod(
          getClusterStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.ClusterStatusRequest,
              dev.caerus.dls.v1.ClusterStatusResponse>(
                service, METHODID_CLUSTER_STATUS)))
        .build();
  }

  private static abstract class AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.caerus.dls.v1.AdminServiceProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AdminService");
    }
  }

  private static final class AdminServiceFileDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier {
    AdminServiceFileDescriptorSupplier() {}
  }

  private static final class AdminServiceMethodDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (AdminServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminServiceFileDescriptorSupplier())
              .addMethod(getListLocksMethod())
              .addMethod(getAbortTransactionMethod())
              .addMethod(getClusterStatusMethod())
              .build();
        }
      }
    }
    return result;
  }
}
