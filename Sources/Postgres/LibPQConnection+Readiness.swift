internal import CLibPQ
import NIOCore

/// libpq driven by readiness: statements are sent without blocking (`PQsetnonblocking`),
/// and a call that must wait for the server suspends its task in `SocketPoller` until the
/// socket is ready, instead of blocking a thread in `PQgetResult`. What libpq's blocking
/// calls do inside (flush the output, wait, read, parse) is spelled out here, one step at a
/// time, so that each wait can be a suspension with a deadline.
extension LibPQConnection {
    /// The next result of the statements sent, as `PQgetResult` gives it (nil at the end of
    /// a statement's results), waiting for the server without blocking a thread.
    ///
    /// - Throws: `deadlineExceeded` when `callDeadline` passes first (the connection is then
    ///   marked `isAbandoned`: a statement may still run on it); `connectionClosed` when the
    ///   connection is lost.
    func nextResult() async throws(PostgresError) -> OpaquePointer? {
        try await self.flushOutput()
        while PQisBusy(self.handle) == 1 {
            // With TLS, bytes already read from the socket may wait, decrypted, in the TLS
            // layer, and the socket would never become readable for them: read first.
            if PQsslInUse(self.handle) == 1 {
                try self.readInput()
                if PQisBusy(self.handle) == 0 { break }
            }
            try await self.waitForSocket(.readable)
            try self.readInput()
        }
        return PQgetResult(self.handle)
    }

    /// Every result of the statement sent last, up to its end: the first error among them,
    /// or else the last one (as `PQexec` keeps them). The caller clears it.
    func lastResult() async throws(PostgresError) -> OpaquePointer? {
        var kept: OpaquePointer?
        var keptIsError = false
        while let result = try await self.nextResult() {
            if keptIsError {
                PQclear(result)
                continue
            }
            PQclear(kept)
            kept = result
            let status = PQresultStatus(result)
            keptIsError = status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE
        }
        return kept
    }

    /// Sends what libpq holds in its output buffer. While the server does not take it, what
    /// the server sends is read meanwhile (libpq's rule for non-blocking connections).
    func flushOutput() async throws(PostgresError) {
        while true {
            switch PQflush(self.handle) {
            case 0:
                return
            case 1:
                try await self.waitForSocket(.readableOrWritable)
                try self.readInput()
            default:
                throw self.lostConnection()
            }
        }
    }

    /// Reads what the server has sent, without waiting.
    private func readInput() throws(PostgresError) {
        guard PQconsumeInput(self.handle) == 1 else { throw self.lostConnection() }
    }

    /// Suspends until the socket is ready, or `callDeadline` passes.
    private func waitForSocket(_ interest: SocketPoller.Interest) async throws(PostgresError) {
        self.markBlocked()
        defer { self.markUnblocked() }
        switch await SocketPoller.shared.wait(for: PQsocket(self.handle), interest, until: self.callDeadline) {
        case .ready, .cancelled:
            return
        case .deadlinePassed:
            self.isBroken = true
            throw PostgresError(code: .deadlineExceeded, message: "the database did not answer by the deadline", host: self.server)
        }
    }

    /// The connection broke under a call: never usable again, whatever libpq's status says.
    private func lostConnection() -> PostgresError {
        self.isBroken = true
        return PostgresError(code: .connectionClosed, message: "connection to \(self.server): \(Self.errorText(of: self.handle))", host: self.server)
    }
}
