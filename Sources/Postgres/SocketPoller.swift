internal import CLibPQ
import NIOConcurrencyHelpers
import NIOCore

import class Foundation.Thread

#if canImport(Glibc)
import Glibc
#endif

/// Waits, on one thread for the whole process, for the sockets of libpq connections to
/// become ready, and resumes each waiting task when its socket is.
///
/// This is what lets a connection run without a thread of its own: a call sends its
/// statement without blocking (libpq's non-blocking mode), then suspends in `wait` until the
/// answer can be read, and the task carries on from there (`LibPQConnection+Readiness.swift`).
/// A waiting task costs a dictionary entry, not a thread; the poller's thread sleeps in
/// `epoll_wait` until a socket is ready or a deadline passes.
///
/// - Each socket has at most one waiter at a time (a connection is used by one task at a
///   time), armed one-shot (`EPOLLONESHOT`), so a ready socket is reported once.
/// - A wait may end early and for nothing (a readiness reported for an earlier wait on the
///   same socket): callers check libpq's state again and wait again.
/// - Every wait has a deadline or is cancellable (or both); the poller wakes for the nearest
///   deadline itself, and an earlier one than it sleeps towards wakes it (an `eventfd`).
final class SocketPoller: @unchecked Sendable {
    // @unchecked: `epoll` and `wakeDescriptor` are set once; everything else is in `state`.

    /// The poller of the process.
    static let shared = SocketPoller()

    enum Interest {
        case readable
        /// Either: libpq, flushing output the server does not take, must also read what the
        /// server sends meanwhile (or both could wait on each other).
        case readableOrWritable
    }

    enum Outcome {
        case ready
        case deadlinePassed
        case cancelled
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Outcome, Never>
        let deadline: NIODeadline?
    }

    private struct State {
        var waiters: [Int32: Waiter] = [:]
        /// Sockets in the epoll set (armed or not).
        var registered: Set<Int32> = []
        var nextId: UInt64 = 0
        /// When the poller's thread wakes at the latest; nil while it sleeps without a limit.
        var wakesAt: NIODeadline?
    }

    private let epoll: Int32
    private let wakeDescriptor: Int32
    private let state = NIOLockedValueBox(State())

    private init() {
        self.epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(self.epoll >= 0, "SocketPoller: epoll_create1 failed, errno \(errno)")
        self.wakeDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(self.wakeDescriptor >= 0, "SocketPoller: eventfd failed, errno \(errno)")
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = self.wakeDescriptor
        precondition(epoll_ctl(self.epoll, EPOLL_CTL_ADD, self.wakeDescriptor, &event) == 0, "SocketPoller: epoll_ctl failed, errno \(errno)")
        let thread = Thread { [self] in self.run() }
        thread.name = "postgres-poller"
        thread.start()
    }

    /// Suspends until `socket` is ready for `interest`, `deadline` passes, or (when
    /// `cancellable`) the task is cancelled.
    func wait(for socket: Int32, _ interest: Interest, until deadline: NIODeadline?, cancellable: Bool = false) async -> Outcome {
        let id = self.state.withLockedValue { state in
            state.nextId += 1
            return state.nextId
        }
        guard cancellable else {
            return await withCheckedContinuation { self.arm(socket, interest, Waiter(id: id, continuation: $0, deadline: deadline)) }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard !Task.isCancelled else { return continuation.resume(returning: .cancelled) }
                self.arm(socket, interest, Waiter(id: id, continuation: continuation, deadline: deadline))
            }
        } onCancel: {
            let waiter = self.state.withLockedValue { state -> Waiter? in
                guard state.waiters[socket]?.id == id else { return nil }
                return state.waiters.removeValue(forKey: socket)
            }
            waiter?.continuation.resume(returning: .cancelled)
        }
    }

    /// Forgets `socket` before its connection closes it (its number may be reused at once).
    func forget(_ socket: Int32) {
        guard socket >= 0 else { return }
        let waiter = self.state.withLockedValue { state -> Waiter? in
            if state.registered.remove(socket) != nil { _ = epoll_ctl(self.epoll, EPOLL_CTL_DEL, socket, nil) }
            return state.waiters.removeValue(forKey: socket)
        }
        waiter?.continuation.resume(returning: .ready)
    }

    private func arm(_ socket: Int32, _ interest: Interest, _ waiter: Waiter) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
        if case .readableOrWritable = interest { event.events |= EPOLLOUT.rawValue }
        event.data.fd = socket
        let (armed, wakePoller) = self.state.withLockedValue { state -> (Bool, Bool) in
            guard socket >= 0 else { return (false, false) }
            let operation = state.registered.contains(socket) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
            var status = epoll_ctl(self.epoll, operation, socket, &event)
            if status != 0, errno == ENOENT || errno == EEXIST {
                // The set and `registered` disagree (a socket closed without `forget`, its
                // number reused): the other operation puts it right.
                status = epoll_ctl(self.epoll, operation == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket, &event)
            }
            guard status == 0 else { return (false, false) }
            state.registered.insert(socket)
            let replaced = state.waiters.updateValue(waiter, forKey: socket)
            precondition(replaced == nil, "SocketPoller: two waits on one socket")
            guard let deadline = waiter.deadline, deadline < (state.wakesAt ?? .distantFuture) else { return (true, false) }
            state.wakesAt = deadline
            return (true, true)
        }
        // A socket that cannot be watched (closed, or lost): "ready", so that the caller's next
        // libpq call finds out what is wrong.
        guard armed else { return waiter.continuation.resume(returning: .ready) }
        if wakePoller { _ = eventfd_write(self.wakeDescriptor, 1) }
    }

    private func run() {
        let capacity: Int32 = 64
        var events = [epoll_event](repeating: epoll_event(), count: Int(capacity))
        while true {
            let timeout = self.state.withLockedValue { state -> Int32 in
                guard let wakesAt = state.wakesAt else { return -1 }
                let left = wakesAt - NIODeadline.now()
                // Whole milliseconds, rounded up: never wake before the deadline.
                return Int32(clamping: max(0, (left.nanoseconds + 999_999) / 1_000_000))
            }
            let count = epoll_wait(self.epoll, &events, capacity, timeout)
            if count < 0 && errno != EINTR {
                preconditionFailure("SocketPoller: epoll_wait failed, errno \(errno)")
            }
            var ready: [CheckedContinuation<Outcome, Never>] = []
            var late: [CheckedContinuation<Outcome, Never>] = []
            self.state.withLockedValue { state in
                for index in 0..<Int(max(0, count)) {
                    let socket = events[index].data.fd
                    if socket == self.wakeDescriptor {
                        var value: eventfd_t = 0
                        _ = eventfd_read(self.wakeDescriptor, &value)
                    } else if let waiter = state.waiters.removeValue(forKey: socket) {
                        ready.append(waiter.continuation)
                    }
                }
                let now = NIODeadline.now()
                var nearest: NIODeadline?
                for (socket, waiter) in state.waiters {
                    guard let deadline = waiter.deadline else { continue }
                    if deadline <= now {
                        state.waiters.removeValue(forKey: socket)
                        late.append(waiter.continuation)
                    } else if deadline < (nearest ?? .distantFuture) {
                        nearest = deadline
                    }
                }
                state.wakesAt = nearest
            }
            for continuation in ready { continuation.resume(returning: .ready) }
            for continuation in late { continuation.resume(returning: .deadlinePassed) }
        }
    }
}
