// Idiomatic Swift layer of the Caerus DLS SDK, over the uniffi-generated CaerusDls.swift.
//
// NOTE: no Swift toolchain was available where this was written; this file has not been
// compiled. See bindings/uniffi/README.md.

import Foundation

extension DlsError {
    /// The stable code of the error, spelled as in the Rust, Python, Node and Kotlin SDKs
    /// (from the error table every SDK shares, see `errorClasses()`).
    public var code: String { errorCode() }
}

/// Cancels the body of `withTransaction` when core reports the transaction lost.
private final class CancelOnLost: LostListener, @unchecked Sendable {
    private let lock = NSLock()
    private var lostReason: LostReason?
    private let cancel: @Sendable () -> Void

    init(cancel: @escaping @Sendable () -> Void) {
        self.cancel = cancel
    }

    func onLost(reason: LostReason) {
        lock.lock()
        lostReason = reason
        lock.unlock()
        cancel()
    }

    var reason: LostReason? {
        lock.lock()
        defer { lock.unlock() }
        return lostReason
    }
}

/// Calls a closure once if the transaction is lost.
private final class ClosureLostListener: LostListener, @unchecked Sendable {
    private let body: @Sendable (LostReason) -> Void

    init(_ body: @escaping @Sendable (LostReason) -> Void) {
        self.body = body
    }

    func onLost(reason: LostReason) {
        body(reason)
    }
}

extension Transaction {
    /// Calls `listener` once if the transaction is lost (never after commit or abort),
    /// on a thread of the SDK's runtime.
    public func onLost(_ listener: @escaping @Sendable (LostReason) -> Void) {
        setLostListener(listener: ClosureLostListener(listener))
    }
}

extension DlsClient {
    /// A client for `endpoints` (`host:port` or `https://host:port`, any node of the
    /// cluster). TLS: `caFile` is the cluster CA (PEM) the nodes' certificates must chain
    /// to; `clientCertFile` and `clientKeyFile` a client certificate for nodes that require
    /// one. Nil values fall back to `DLS_CA_FILE`, `DLS_CLIENT_CERT_FILE`, `DLS_CLIENT_KEY_FILE`.
    public convenience init(
        endpoints: [String], apiKey: String? = nil,
        caFile: String? = nil, clientCertFile: String? = nil, clientKeyFile: String? = nil
    ) throws {
        try self.init(config: ClientConfig(
            endpoints: endpoints, apiKey: apiKey,
            caFile: caFile, clientCertFile: clientCertFile, clientKeyFile: clientKeyFile))
    }

    /// Runs `body` in a new transaction: commits when it returns, aborts when it throws
    /// (the error is rethrown). The lease is heartbeated in Rust meanwhile; if it is lost,
    /// the body's task is cancelled and `DlsError.TransactionLost` is thrown.
    ///
    /// ```swift
    /// try await client.withTransaction(timeoutMs: 15000) { tx in
    ///     let lock = try await tx.acquireLock(namespace: "billing-jobs", key: "monthly-billing-job",
    ///                                         mode: .exclusive, timeoutMs: 10000)
    ///     try await chargeSubscriptions(fencingToken: lock.fencingToken)
    /// }
    /// ```
    public func withTransaction<T: Sendable>(
        timeoutMs: UInt64? = nil,
        priority: Int32? = nil,
        name: String? = nil,
        maxDurationMs: UInt64? = nil,
        lostStream: Bool = false,
        _ body: @escaping @Sendable (Transaction) async throws -> T
    ) async throws -> T {
        // Begins with its first call: a first acquire carries the begin (one request).
        let tx = try transaction(
            options: TransactionOptions(
                timeoutMs: timeoutMs, priority: priority, name: name, maxDurationMs: maxDurationMs,
                lostStream: lostStream))
        let work = Task { try await body(tx) }
        let watcher = CancelOnLost(cancel: { work.cancel() })
        tx.setLostListener(listener: watcher)
        do {
            let value = try await work.value
            if let reason = watcher.reason {
                throw DlsError.TransactionLost(message: reason.message, endCause: nil)
            }
            try await tx.commit()
            return value
        } catch {
            try? await tx.abort()
            if let reason = watcher.reason {
                throw DlsError.TransactionLost(message: reason.message, endCause: nil)
            }
            throw error
        }
    }

    /// Runs `body` holding one lock, as `withTransaction` runs its body; the begin and the
    /// acquire go in one request. `timeoutMs` is the wait for the lock, `leaseMs` the lease.
    public func withLock<T: Sendable>(
        namespace: String,
        key: String,
        mode: LockMode = .exclusive,
        timeoutMs: UInt64? = nil,
        leaseMs: UInt64? = nil,
        priority: Int32? = nil,
        name: String? = nil,
        maxDurationMs: UInt64? = nil,
        lostStream: Bool = false,
        _ body: @escaping @Sendable (Lock, Transaction) async throws -> T
    ) async throws -> T {
        try await withTransaction(
            timeoutMs: leaseMs, priority: priority, name: name, maxDurationMs: maxDurationMs,
            lostStream: lostStream
        ) { tx in
            let lock = try await tx.acquireLock(namespace: namespace, key: key, mode: mode, timeoutMs: timeoutMs)
            return try await body(lock, tx)
        }
    }

    /// The event log from `fromSequence` as an `AsyncThrowingStream`.
    public func events(
        fromSequence: UInt64 = 0,
        namespacePrefixes: [String] = [],
        kinds: [EventKind] = [],
        onlyNew: Bool = false
    ) -> AsyncThrowingStream<Event, Error> {
        let options = WatchOptions(
            fromSequence: fromSequence, namespacePrefixes: namespacePrefixes, kinds: kinds, onlyNew: onlyNew)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let stream = try await self.watchEvents(options: options)
                    while !Task.isCancelled, let event = try await stream.next() {
                        continuation.yield(event)
                    }
                    stream.cancel()
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
