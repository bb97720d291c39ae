/// The one error type of the `Postgres` module.
///
/// Server errors carry the SQLSTATE so that callers can react to a class of failure
/// (a unique violation, a serialization failure) without parsing messages. The
/// `description` may contain server text: log it, never put it into an HTTP response.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; extensible like postgres-nio's `PSQLError.Code`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { self.name }

        /// The server could not be reached or refused the login.
        public static let connectionFailed = Code("connectionFailed")
        /// The connection was lost while in use or had been closed.
        public static let connectionClosed = Code("connectionClosed")
        /// The server answered a statement with an error (see `sqlState`).
        public static let server = Code("server")
        /// A column or parameter held a value of another type than the one asked for.
        public static let typeMismatch = Code("typeMismatch")
        /// A column held NULL where a non-optional value was asked for.
        public static let unexpectedNull = Code("unexpectedNull")
        /// A value could not be decoded from its wire form, or encoded into it.
        public static let invalidValue = Code("invalidValue")
        /// A column index or name that the result does not have.
        public static let noSuchColumn = Code("noSuchColumn")
        /// No connection of the pool became free within the lease timeout.
        public static let poolTimeout = Code("poolTimeout")
        /// The pool has been shut down.
        public static let poolClosed = Code("poolClosed")
        /// As many leases as the pool allows were waiting already.
        public static let poolExhausted = Code("poolExhausted")
        /// A call on a leased connection had not ended by the lease's deadline
        /// (`PostgresDeadline`); the connection is not used again.
        public static let deadlineExceeded = Code("deadlineExceeded")
    }

    /// Well-known SQLSTATE values (PostgreSQL manual, appendix A).
    public enum SQLState {
        public static let uniqueViolation = "23505"
        public static let foreignKeyViolation = "23503"
        public static let checkViolation = "23514"
        public static let notNullViolation = "23502"
        public static let serializationFailure = "40001"
        public static let deadlockDetected = "40P01"
        public static let insufficientPrivilege = "42501"
        public static let undefinedTable = "42P01"
        public static let queryCanceled = "57014"
        public static let adminShutdown = "57P01"
        public static let crashShutdown = "57P02"
        public static let cannotConnectNow = "57P03"
        public static let idleInTransactionSessionTimeout = "25P03"
        public static let lockNotAvailable = "55P03"
        public static let invalidPassword = "28P01"
    }

    public var code: Code
    /// The five-character SQLSTATE, for `.server` errors (and failed logins).
    public var sqlState: String?
    /// The primary human-readable message.
    public var message: String
    /// The server's optional detail line.
    public var detail: String?
    /// The constraint that was violated, when the server names one.
    public var constraint: String?
    /// The `host:port` the failure concerns, for connection errors.
    public var host: String?

    public init(
        code: Code,
        message: String,
        sqlState: String? = nil,
        detail: String? = nil,
        constraint: String? = nil,
        host: String? = nil
    ) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.constraint = constraint
        self.host = host
    }

    /// A unique constraint was violated (SQLSTATE 23505).
    public var isUniqueViolation: Bool { self.sqlState == SQLState.uniqueViolation }

    /// The transaction could not be serialized and may be retried (SQLSTATE 40001 or 40P01).
    public var isSerializationFailure: Bool {
        self.sqlState == SQLState.serializationFailure || self.sqlState == SQLState.deadlockDetected
    }

    /// The connection is gone; the statement may or may not have run.
    public var isConnectionLoss: Bool {
        self.code == .connectionClosed || self.code == .connectionFailed
    }

    /// Whether the failure means the database is unreachable, overloaded or too slow now,
    /// rather than that the request was wrong: worth answering "unavailable, retry" (503).
    ///
    /// Connection failures and losses; the pool's timeout, bound and shutdown; a deadline
    /// passed (`deadlineExceeded`); and the
    /// SQLSTATEs of classes 08 (connection exception), 53 (insufficient resources: too many
    /// connections, out of memory or disk) and 57 (operator intervention: statement timeout
    /// or cancel 57014, shutdown 57P01/57P02, starting up 57P03), the idle-in-transaction
    /// timeout 25P03, lock timeout 55P03, and deadlocks or serialization failures that
    /// outlasted their retries.
    public var isUnavailability: Bool {
        switch self.code {
        case .connectionFailed, .connectionClosed, .poolTimeout, .poolClosed, .poolExhausted, .deadlineExceeded:
            return true
        default:
            break
        }
        guard let sqlState else { return false }
        switch sqlState.prefix(2) {
        case "08", "53", "57":
            return true
        default:
            return sqlState == SQLState.idleInTransactionSessionTimeout || sqlState == SQLState.lockNotAvailable
                || self.isSerializationFailure
        }
    }

    public var description: String {
        var text = "PostgresError(\(self.code)"
        if let sqlState { text += ", sqlState: \(sqlState)" }
        if let host { text += ", host: \(host)" }
        text += "): \(self.message)"
        if let detail { text += " (\(detail))" }
        if let constraint { text += " [constraint \(constraint)]" }
        return text
    }
}
