/// The named prepared statements one session has, by SQL text and parameter types: which
/// name a statement already runs under, and the name the next one gets.
///
/// A value without I/O: `LibPQConnection` reserves a name here, prepares the statement on the
/// server under it (`PQprepare`, or `PQsendPrepare` in pipeline mode) and records it. Names
/// are `receipts_1`, `receipts_2`, … in the order they are reserved, and a name is never
/// reserved twice, even after its statement failed to prepare and was forgotten: a plain
/// counter needs no bookkeeping of which names the server holds, and a name sent to the
/// server always means the one statement it was reserved for.
struct PreparedStatements: Sendable {
    /// What a prepared statement is found by: the same SQL with other parameter types is
    /// another statement on the server (its parameters are parsed as those types).
    struct Key: Hashable, Sendable {
        var sql: String
        var types: [UInt32]
    }

    /// The statements recorded, by key.
    private var names: [Key: String] = [:]
    /// How many names have been reserved: the last one is `receipts_<reserved>`.
    private(set) var reserved = 0

    /// The name of the statement recorded for `key`; nil when there is none (never prepared,
    /// or forgotten since).
    func name(for key: Key) -> String? {
        self.names[key]
    }

    /// Reserves the name the next statement is prepared under. Not yet recorded: the caller
    /// records it once the statement is prepared (or sent to be, in pipeline mode).
    mutating func reserveName() -> String {
        self.reserved += 1
        return "receipts_\(self.reserved)"
    }

    /// Records that `key` is prepared (or being prepared) as `name`.
    mutating func record(_ name: String, for key: Key) {
        self.names[key] = name
    }

    /// Forgets the statement of `key`, whose prepare failed: the next use prepares it again,
    /// under a new name.
    mutating func forget(_ key: Key) {
        self.names[key] = nil
    }
}
