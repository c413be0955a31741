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

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListMembersRequest,
      dev.caerus.dls.v1.ListMembersResponse> getListMembersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListMembers",
      requestType = dev.caerus.dls.v1.ListMembersRequest.class,
      responseType = dev.caerus.dls.v1.ListMembersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListMembersRequest,
      dev.caerus.dls.v1.ListMembersResponse> getListMembersMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.ListMembersRequest, dev.caerus.dls.v1.ListMembersResponse> getListMembersMethod;
    if ((getListMembersMethod = AdminServiceGrpc.getListMembersMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListMembersMethod = AdminServiceGrpc.getListMembersMethod) == null) {
          AdminServiceGrpc.getListMembersMethod = getListMembersMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.ListMembersRequest, dev.caerus.dls.v1.ListMembersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListMembers"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ListMembersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.ListMembersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListMembers"))
              .build();
        }
      }
    }
    return getListMembersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.AddMemberRequest,
      dev.caerus.dls.v1.AddMemberResponse> getAddMemberMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AddMember",
      requestType = dev.caerus.dls.v1.AddMemberRequest.class,
      responseType = dev.caerus.dls.v1.AddMemberResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.AddMemberRequest,
      dev.caerus.dls.v1.AddMemberResponse> getAddMemberMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.AddMemberRequest, dev.caerus.dls.v1.AddMemberResponse> getAddMemberMethod;
    if ((getAddMemberMethod = AdminServiceGrpc.getAddMemberMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getAddMemberMethod = AdminServiceGrpc.getAddMemberMethod) == null) {
          AdminServiceGrpc.getAddMemberMethod = getAddMemberMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.AddMemberRequest, dev.caerus.dls.v1.AddMemberResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AddMember"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AddMemberRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.AddMemberResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("AddMember"))
              .build();
        }
      }
    }
    return getAddMemberMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.RemoveMemberRequest,
      dev.caerus.dls.v1.RemoveMemberResponse> getRemoveMemberMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RemoveMember",
      requestType = dev.caerus.dls.v1.RemoveMemberRequest.class,
      responseType = dev.caerus.dls.v1.RemoveMemberResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.RemoveMemberRequest,
      dev.caerus.dls.v1.RemoveMemberResponse> getRemoveMemberMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.RemoveMemberRequest, dev.caerus.dls.v1.RemoveMemberResponse> getRemoveMemberMethod;
    if ((getRemoveMemberMethod = AdminServiceGrpc.getRemoveMemberMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRemoveMemberMethod = AdminServiceGrpc.getRemoveMemberMethod) == null) {
          AdminServiceGrpc.getRemoveMemberMethod = getRemoveMemberMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.RemoveMemberRequest, dev.caerus.dls.v1.RemoveMemberResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RemoveMember"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.RemoveMemberRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.RemoveMemberResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RemoveMember"))
              .build();
        }
      }
    }
    return getRemoveMemberMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.PromoteMemberRequest,
      dev.caerus.dls.v1.PromoteMemberResponse> getPromoteMemberMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "PromoteMember",
      requestType = dev.caerus.dls.v1.PromoteMemberRequest.class,
      responseType = dev.caerus.dls.v1.PromoteMemberResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.PromoteMemberRequest,
      dev.caerus.dls.v1.PromoteMemberResponse> getPromoteMemberMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.PromoteMemberRequest, dev.caerus.dls.v1.PromoteMemberResponse> getPromoteMemberMethod;
    if ((getPromoteMemberMethod = AdminServiceGrpc.getPromoteMemberMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getPromoteMemberMethod = AdminServiceGrpc.getPromoteMemberMethod) == null) {
          AdminServiceGrpc.getPromoteMemberMethod = getPromoteMemberMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.PromoteMemberRequest, dev.caerus.dls.v1.PromoteMemberResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "PromoteMember"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.PromoteMemberRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.PromoteMemberResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("PromoteMember"))
              .build();
        }
      }
    }
    return getPromoteMemberMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.caerus.dls.v1.SaveSnapshotRequest,
      dev.caerus.dls.v1.SaveSnapshotResponse> getSaveSnapshotMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SaveSnapshot",
      requestType = dev.caerus.dls.v1.SaveSnapshotRequest.class,
      responseType = dev.caerus.dls.v1.SaveSnapshotResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.caerus.dls.v1.SaveSnapshotRequest,
      dev.caerus.dls.v1.SaveSnapshotResponse> getSaveSnapshotMethod() {
    io.grpc.MethodDescriptor<dev.caerus.dls.v1.SaveSnapshotRequest, dev.caerus.dls.v1.SaveSnapshotResponse> getSaveSnapshotMethod;
    if ((getSaveSnapshotMethod = AdminServiceGrpc.getSaveSnapshotMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSaveSnapshotMethod = AdminServiceGrpc.getSaveSnapshotMethod) == null) {
          AdminServiceGrpc.getSaveSnapshotMethod = getSaveSnapshotMethod =
              io.grpc.MethodDescriptor.<dev.caerus.dls.v1.SaveSnapshotRequest, dev.caerus.dls.v1.SaveSnapshotResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SaveSnapshot"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.SaveSnapshotRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.caerus.dls.v1.SaveSnapshotResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("SaveSnapshot"))
              .build();
        }
      }
    }
    return getSaveSnapshotMethod;
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

    /**
     * <pre>
     * The cluster's members (voters and learners) as the leader sees them, with how far each
     * has replicated. Served by the leader.
     * </pre>
     */
    default void listMembers(dev.caerus.dls.v1.ListMembersRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListMembersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListMembersMethod(), responseObserver);
    }

    /**
     * <pre>
     * Adds a node through raft joint consensus: first as a learner (not voting), which the
     * leader catches up (snapshot, then log); then, unless `stay_learner`, promotes it to a
     * voter. Start the new node with `dls serve --join` and an empty data directory.
     * ALREADY_EXISTS if the id is a member; INVALID_ARGUMENT for a bad id or address;
     * DEADLINE_EXCEEDED if it did not catch up in time (it stays a learner: start it, then
     * PromoteMember).
     * </pre>
     */
    default void addMember(dev.caerus.dls.v1.AddMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AddMemberResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAddMemberMethod(), responseObserver);
    }

    /**
     * <pre>
     * Removes a member (voter or learner) through joint consensus. Removing the leader
     * commits the change, after which the leader steps down and the others elect a new one.
     * FAILED_PRECONDITION when the removal would leave no voter; NOT_FOUND if it is no member.
     * </pre>
     */
    default void removeMember(dev.caerus.dls.v1.RemoveMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.RemoveMemberResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRemoveMemberMethod(), responseObserver);
    }

    /**
     * <pre>
     * Makes a learner a voter once it has caught up. FAILED_PRECONDITION if it is no learner.
     * </pre>
     */
    default void promoteMember(dev.caerus.dls.v1.PromoteMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.PromoteMemberResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPromoteMemberMethod(), responseObserver);
    }

    /**
     * <pre>
     * A consistent snapshot of the replicated state, for a backup (`dls snapshot save`).
     * The leader confirms it still leads (a linearizable read), encodes the state as of
     * everything committed before the call, and streams the bytes of a snapshot file
     * (magic, state, length and CRC32 trailer) that `dls snapshot restore` checks and reads.
     * </pre>
     */
    default void saveSnapshot(dev.caerus.dls.v1.SaveSnapshotRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.SaveSnapshotResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSaveSnapshotMethod(), responseObserver);
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

    /**
     * <pre>
     * The cluster's members (voters and learners) as the leader sees them, with how far each
     * has replicated. Served by the leader.
     * </pre>
     */
    public void listMembers(dev.caerus.dls.v1.ListMembersRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListMembersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListMembersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Adds a node through raft joint consensus: first as a learner (not voting), which the
     * leader catches up (snapshot, then log); then, unless `stay_learner`, promotes it to a
     * voter. Start the new node with `dls serve --join` and an empty data directory.
     * ALREADY_EXISTS if the id is a member; INVALID_ARGUMENT for a bad id or address;
     * DEADLINE_EXCEEDED if it did not catch up in time (it stays a learner: start it, then
     * PromoteMember).
     * </pre>
     */
    public void addMember(dev.caerus.dls.v1.AddMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AddMemberResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAddMemberMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Removes a member (voter or learner) through joint consensus. Removing the leader
     * commits the change, after which the leader steps down and the others elect a new one.
     * FAILED_PRECONDITION when the removal would leave no voter; NOT_FOUND if it is no member.
     * </pre>
     */
    public void removeMember(dev.caerus.dls.v1.RemoveMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.RemoveMemberResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRemoveMemberMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Makes a learner a voter once it has caught up. FAILED_PRECONDITION if it is no learner.
     * </pre>
     */
    public void promoteMember(dev.caerus.dls.v1.PromoteMemberRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.PromoteMemberResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPromoteMemberMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * A consistent snapshot of the replicated state, for a backup (`dls snapshot save`).
     * The leader confirms it still leads (a linearizable read), encodes the state as of
     * everything committed before the call, and streams the bytes of a snapshot file
     * (magic, state, length and CRC32 trailer) that `dls snapshot restore` checks and reads.
     * </pre>
     */
    public void saveSnapshot(dev.caerus.dls.v1.SaveSnapshotRequest request,
        io.grpc.stub.StreamObserver<dev.caerus.dls.v1.SaveSnapshotResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getSaveSnapshotMethod(), getCallOptions()), request, responseObserver);
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

    /**
     * <pre>
     * The cluster's members (voters and learners) as the leader sees them, with how far each
     * has replicated. Served by the leader.
     * </pre>
     */
    public dev.caerus.dls.v1.ListMembersResponse listMembers(dev.caerus.dls.v1.ListMembersRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListMembersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Adds a node through raft joint consensus: first as a learner (not voting), which the
     * leader catches up (snapshot, then log); then, unless `stay_learner`, promotes it to a
     * voter. Start the new node with `dls serve --join` and an empty data directory.
     * ALREADY_EXISTS if the id is a member; INVALID_ARGUMENT for a bad id or address;
     * DEADLINE_EXCEEDED if it did not catch up in time (it stays a learner: start it, then
     * PromoteMember).
     * </pre>
     */
    public dev.caerus.dls.v1.AddMemberResponse addMember(dev.caerus.dls.v1.AddMemberRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAddMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Removes a member (voter or learner) through joint consensus. Removing the leader
     * commits the change, after which the leader steps down and the others elect a new one.
     * FAILED_PRECONDITION when the removal would leave no voter; NOT_FOUND if it is no member.
     * </pre>
     */
    public dev.caerus.dls.v1.RemoveMemberResponse removeMember(dev.caerus.dls.v1.RemoveMemberRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRemoveMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Makes a learner a voter once it has caught up. FAILED_PRECONDITION if it is no learner.
     * </pre>
     */
    public dev.caerus.dls.v1.PromoteMemberResponse promoteMember(dev.caerus.dls.v1.PromoteMemberRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPromoteMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A consistent snapshot of the replicated state, for a backup (`dls snapshot save`).
     * The leader confirms it still leads (a linearizable read), encodes the state as of
     * everything committed before the call, and streams the bytes of a snapshot file
     * (magic, state, length and CRC32 trailer) that `dls snapshot restore` checks and reads.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.caerus.dls.v1.SaveSnapshotResponse>
        saveSnapshot(dev.caerus.dls.v1.SaveSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getSaveSnapshotMethod(), getCallOptions(), request);
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

    /**
     * <pre>
     * The cluster's members (voters and learners) as the leader sees them, with how far each
     * has replicated. Served by the leader.
     * </pre>
     */
    public dev.caerus.dls.v1.ListMembersResponse listMembers(dev.caerus.dls.v1.ListMembersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListMembersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Adds a node through raft joint consensus: first as a learner (not voting), which the
     * leader catches up (snapshot, then log); then, unless `stay_learner`, promotes it to a
     * voter. Start the new node with `dls serve --join` and an empty data directory.
     * ALREADY_EXISTS if the id is a member; INVALID_ARGUMENT for a bad id or address;
     * DEADLINE_EXCEEDED if it did not catch up in time (it stays a learner: start it, then
     * PromoteMember).
     * </pre>
     */
    public dev.caerus.dls.v1.AddMemberResponse addMember(dev.caerus.dls.v1.AddMemberRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAddMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Removes a member (voter or learner) through joint consensus. Removing the leader
     * commits the change, after which the leader steps down and the others elect a new one.
     * FAILED_PRECONDITION when the removal would leave no voter; NOT_FOUND if it is no member.
     * </pre>
     */
    public dev.caerus.dls.v1.RemoveMemberResponse removeMember(dev.caerus.dls.v1.RemoveMemberRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRemoveMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Makes a learner a voter once it has caught up. FAILED_PRECONDITION if it is no learner.
     * </pre>
     */
    public dev.caerus.dls.v1.PromoteMemberResponse promoteMember(dev.caerus.dls.v1.PromoteMemberRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPromoteMemberMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A consistent snapshot of the replicated state, for a backup (`dls snapshot save`).
     * The leader confirms it still leads (a linearizable read), encodes the state as of
     * everything committed before the call, and streams the bytes of a snapshot file
     * (magic, state, length and CRC32 trailer) that `dls snapshot restore` checks and reads.
     * </pre>
     */
    public java.util.Iterator<dev.caerus.dls.v1.SaveSnapshotResponse> saveSnapshot(
        dev.caerus.dls.v1.SaveSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getSaveSnapshotMethod(), getCallOptions(), request);
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

    /**
     * <pre>
     * The cluster's members (voters and learners) as the leader sees them, with how far each
     * has replicated. Served by the leader.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.ListMembersResponse> listMembers(
        dev.caerus.dls.v1.ListMembersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListMembersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Adds a node through raft joint consensus: first as a learner (not voting), which the
     * leader catches up (snapshot, then log); then, unless `stay_learner`, promotes it to a
     * voter. Start the new node with `dls serve --join` and an empty data directory.
     * ALREADY_EXISTS if the id is a member; INVALID_ARGUMENT for a bad id or address;
     * DEADLINE_EXCEEDED if it did not catch up in time (it stays a learner: start it, then
     * PromoteMember).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.AddMemberResponse> addMember(
        dev.caerus.dls.v1.AddMemberRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAddMemberMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Removes a member (voter or learner) through joint consensus. Removing the leader
     * commits the change, after which the leader steps down and the others elect a new one.
     * FAILED_PRECONDITION when the removal would leave no voter; NOT_FOUND if it is no member.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.RemoveMemberResponse> removeMember(
        dev.caerus.dls.v1.RemoveMemberRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRemoveMemberMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Makes a learner a voter once it has caught up. FAILED_PRECONDITION if it is no learner.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.caerus.dls.v1.PromoteMemberResponse> promoteMember(
        dev.caerus.dls.v1.PromoteMemberRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPromoteMemberMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_LIST_LOCKS = 0;
  private static final int METHODID_ABORT_TRANSACTION = 1;
  private static final int METHODID_CLUSTER_STATUS = 2;
  private static final int METHODID_LIST_MEMBERS = 3;
  private static final int METHODID_ADD_MEMBER = 4;
  private static final int METHODID_REMOVE_MEMBER = 5;
  private static final int METHODID_PROMOTE_MEMBER = 6;
  private static final int METHODID_SAVE_SNAPSHOT = 7;

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
        case METHODID_LIST_MEMBERS:
          serviceImpl.listMembers((dev.caerus.dls.v1.ListMembersRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.ListMembersResponse>) responseObserver);
          break;
        case METHODID_ADD_MEMBER:
          serviceImpl.addMember((dev.caerus.dls.v1.AddMemberRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.AddMemberResponse>) responseObserver);
          break;
        case METHODID_REMOVE_MEMBER:
          serviceImpl.removeMember((dev.caerus.dls.v1.RemoveMemberRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.RemoveMemberResponse>) responseObserver);
          break;
        case METHODID_PROMOTE_MEMBER:
          serviceImpl.promoteMember((dev.caerus.dls.v1.PromoteMemberRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.PromoteMemberResponse>) responseObserver);
          break;
        case METHODID_SAVE_SNAPSHOT:
          serviceImpl.saveSnapshot((dev.caerus.dls.v1.SaveSnapshotRequest) request,
              (io.grpc.stub.StreamObserver<dev.caerus.dls.v1.SaveSnapshotResponse>) responseObserver);
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
        .addMethod(
          getListMembersMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.ListMembersRequest,
              dev.caerus.dls.v1.ListMembersResponse>(
                service, METHODID_LIST_MEMBERS)))
        .addMethod(
          getAddMemberMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.AddMemberRequest,
              dev.caerus.dls.v1.AddMemberResponse>(
                service, METHODID_ADD_MEMBER)))
        .addMethod(
          getRemoveMemberMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.RemoveMemberRequest,
              dev.caerus.dls.v1.RemoveMemberResponse>(
                service, METHODID_REMOVE_MEMBER)))
        .addMethod(
          getPromoteMemberMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.caerus.dls.v1.PromoteMemberRequest,
              dev.caerus.dls.v1.PromoteMemberResponse>(
                service, METHODID_PROMOTE_MEMBER)))
        .addMethod(
          getSaveSnapshotMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.caerus.dls.v1.SaveSnapshotRequest,
              dev.caerus.dls.v1.SaveSnapshotResponse>(
                service, METHODID_SAVE_SNAPSHOT)))
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
              .addMethod(getListMembersMethod())
              .addMethod(getAddMemberMethod())
              .addMethod(getRemoveMemberMethod())
              .addMethod(getPromoteMemberMethod())
              .addMethod(getSaveSnapshotMethod())
              .build();
        }
      }
    }
    return result;
  }
}
