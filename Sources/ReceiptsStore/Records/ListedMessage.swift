import Foundation
import Postgres
import ReceiptsCore

/// A message of a page (`ReceiptsStore.messages`), its receipts as the database sent them.
///
/// A page of a 1,000-member group's messages holds some 100,000 user ids in its
/// `deliveredTo` and `readBy` lists; they are written out as JSON straight from the result's
/// bytes (`UserIdList`) and, for the viewer's own messages, counted as each receipt chunk
/// arrives (`ReceiptTally`), without a `String` for each. A page shows no delivery times and
/// no hidden reads, so they are not read.
public struct ListedMessage: Sendable {
    public let id: String
    public let chatId: String
    public let seq: Int64
    public let senderId: String
    public let text: String
    public let createdAt: Date
    /// `delivered_to`: who it was delivered to, its chunks' lists in chunk order.
    public let deliveredTo: UserIdList
    /// `read_by`: who visibly read it, its chunks' lists in chunk order.
    public let readBy: UserIdList
    /// Its deliveries and reads taken in for its `receipt`: only on the viewer's own messages.
    public let tally: ReceiptTally?

    /// A message from its row (`MessageRecord.columns`) and its receipt chunks.
    init(row: PostgresRow, chatId: String, chunks: [ListedReceiptChunk], tally: ReceiptTally?) throws {
        self.id = try row.decode(column: 0)
        self.chatId = chatId
        self.seq = try row.decode(column: 1)
        self.senderId = try row.decode(column: 2)
        self.text = try row.decode(column: 3)
        self.createdAt = try row.decode(column: 4)
        // In chunk order (the order `ReceiptChunk` describes).
        let chunks = chunks.sorted { $0.chunk < $1.chunk }
        self.deliveredTo = UserIdList(chunks.map(\.deliveredTo), areIdentifiers: chunks.allSatisfy(\.deliveredToAreIdentifiers))
        self.readBy = UserIdList(chunks.map(\.readBy), areIdentifiers: chunks.allSatisfy(\.readByAreIdentifiers))
        self.tally = tally
    }
}

/// The receipt chunks of a page's messages as they arrive from the database, in no order:
/// kept for their lists, and taken into the tallies of the viewer's messages at once.
struct ListedReceiptChunks: Sendable {
    private(set) var chunks: [Int64: [ListedReceiptChunk]] = [:]
    /// By seq: the tallies of the viewer's messages.
    private(set) var tallies: [Int64: ReceiptTally]

    init(tallies: [Int64: ReceiptTally]) {
        self.tallies = tallies
    }

    mutating func add(_ chunk: ListedReceiptChunk) {
        self.chunks[chunk.seq, default: []].append(chunk)
        // Taken out while it counts, so that its arrays are changed in place.
        guard var tally = self.tallies.removeValue(forKey: chunk.seq) else { return }
        chunk.deliveredTo.forEach { tally.delivered(to: $0) }
        var times = chunk.readAt.makeIterator()
        // As many times as readers: checked when the chunk was read.
        chunk.readBy.forEach { tally.read(by: $0, at: times.next()!) }
        self.tallies[chunk.seq] = tally
    }
}

/// User ids as the database sent them: the elements of one text array after another.
public struct UserIdList: Sendable {
    private let arrays: [PostgresTextElements]
    /// Whether every id is a valid id (`Identifier`), as every stored id is: such a list needs
    /// no escapes in JSON. Checked as the rows arrived, off the answer's critical path.
    public let areIdentifiers: Bool

    init(_ arrays: [PostgresTextElements], areIdentifiers: Bool) {
        self.arrays = arrays
        self.areIdentifiers = areIdentifiers
    }

    /// How many ids there are.
    public var count: Int { self.arrays.reduce(0) { $0 + $1.count } }

    /// How many bytes the ids have, all together.
    public var byteCount: Int { self.arrays.reduce(0) { $0 + $1.byteCount } }

    /// Calls `body` with each id's UTF-8 bytes, in order; they are valid only during the call.
    public func forEach(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        for array in self.arrays {
            try array.forEach(body)
        }
    }

    /// The ids as `String`s.
    public var strings: [String] { self.arrays.flatMap(\.strings) }
}

/// One row of `receipts.receipt_chunks` as a page reads it: who has the message and who
/// visibly read it when, among the members of one chunk.
struct ListedReceiptChunk: Sendable {
    let seq: Int64
    let chunk: Int32
    let deliveredTo: PostgresTextElements
    let readBy: PostgresTextElements
    let readAt: [Date]
    /// Whether every id of `deliveredTo` and of `readBy` is a valid id (`UserIdList.areIdentifiers`).
    let deliveredToAreIdentifiers: Bool
    let readByAreIdentifiers: Bool

    /// The statement that reads the chunks of a chat's messages with `$3 <= seq <= $4`, in
    /// no order (`ReceiptsStore.messages` says why).
    static let sql = """
        SELECT seq, chunk, delivered_to, read_by, read_at FROM receipts.receipt_chunks
        WHERE tenant_id = $1 AND chat_id = $2 AND seq >= $3 AND seq <= $4
        """

    init(row: PostgresRow) throws {
        self.seq = try row.decode(column: 0)
        self.chunk = try row.decode(column: 1)
        self.deliveredTo = try row.decode(column: 2)
        self.readBy = try row.decode(column: 3)
        self.readAt = try row.decode(column: 4)
        guard self.readBy.count == self.readAt.count else { throw unequalArrays(seq: self.seq) }
        self.deliveredToAreIdentifiers = Self.areIdentifiers(self.deliveredTo)
        self.readByAreIdentifiers = Self.areIdentifiers(self.readBy)
    }

    private static func areIdentifiers(_ ids: PostgresTextElements) -> Bool {
        var areIdentifiers = true
        ids.forEach { if areIdentifiers && !Identifier.isValid(utf8: $0) { areIdentifiers = false } }
        return areIdentifiers
    }
}

/// As a JSON array of strings (an encoder that knows the type writes it from the bytes).
extension UserIdList: Encodable {
    public func encode(to encoder: any Encoder) throws {
        try self.strings.encode(to: encoder)
    }
}
