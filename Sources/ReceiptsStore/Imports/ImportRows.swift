import Postgres
import ReceiptsCore

/// The staged rows of import lines, in the text format of `COPY … FROM STDIN` into a table
/// like `receipts.import_rows` (`ImportRows.copy`): one row a line, a message's readers and
/// deliverers in arrays beside their times (sql/migrations/0028_imports.sql, `import_rows`).
///
/// Every value is one the parser checked (ids of `[A-Za-z0-9._:@-]`, RFC 3339 times, a chat's
/// kind, a text without NUL), written by `PostgresCopyText`: escaped as COPY's text format
/// wants, arrays as literals with every element quoted (an id may be `NULL`, which unquoted
/// would be a null element).
struct ImportRows {
    /// The session's table a body is COPY'd into (COPY FROM refuses a table with row-level
    /// security, as `receipts.import_rows` has): created for the transaction, then moved.
    static let createUploadTable = "CREATE TEMPORARY TABLE import_upload (LIKE receipts.import_rows) ON COMMIT DROP"
    static let moveUploadedRows = "INSERT INTO receipts.import_rows SELECT * FROM import_upload"

    /// The statement that takes what this writes.
    static func copy() -> String {
        """
        COPY import_upload (tenant_id, import_id, line, kind, chat_id, message_id, user_id, body, created_at, \
        thread_id, chat_kind, members, joined_at, mentions, mentions_all, read_by, read_at, delivered_to, delivered_at, \
        read, at) FROM STDIN
        """
    }

    /// What the rows of the next lines are appended to.
    var bytes: [UInt8] = []
    /// The tenant and import columns, as every row begins: `tenant\timport\t`.
    private let prefix: [UInt8]

    init(tenant: String, importId: String) {
        var prefix: [UInt8] = []
        PostgresCopyText.appendField(tenant, to: &prefix)
        prefix.append(PostgresCopyText.fieldSeparator)
        PostgresCopyText.appendField(importId, to: &prefix)
        prefix.append(PostgresCopyText.fieldSeparator)
        self.prefix = prefix
    }

    /// Appends the rows of `line`, which is line number `number` of the body.
    mutating func append(_ line: ImportLine, number: Int64) {
        switch line {
        case .chat(let chat):
            self.row(number, "c", chat: chat.id, createdAt: chat.createdAt, chatKind: chat.kind.rawValue,
                     members: chat.members.map(\.userId), joinedAt: chat.members.map { $0.joinedAt?.text })
        case .message(let message):
            self.row(number, "m", chat: message.chatId, message: message.id, user: message.senderId, body: message.text,
                     createdAt: message.createdAt, thread: message.threadId, mentions: message.mentions,
                     mentionsAll: message.mentionsAll, readers: message.readBy, receivers: message.deliveredTo)
        case .position(let position):
            self.row(number, "p", chat: position.chatId, message: position.upTo, user: position.userId,
                     read: position.isRead, at: position.at)
        }
    }

    private mutating func row(
        _ number: Int64, _ kind: Character, chat: String, message: String? = nil, user: String? = nil, body: String? = nil,
        createdAt: ImportTime? = nil, thread: String? = nil, chatKind: String? = nil, members: [String]? = nil,
        joinedAt: [String?]? = nil, mentions: [String]? = nil, mentionsAll: Bool? = nil,
        readers: [ImportLine.Receipt]? = nil, receivers: [ImportLine.Receipt]? = nil, read: Bool? = nil, at: ImportTime? = nil
    ) {
        self.bytes.append(contentsOf: self.prefix)
        self.bytes.append(contentsOf: String(number).utf8)
        self.field(String(kind))
        self.field(chat)
        self.field(message)
        self.field(user)
        self.field(body)
        self.field(createdAt?.text)
        self.field(thread)
        self.field(chatKind)
        self.array(members)
        self.array(joinedAt)
        self.array(mentions)
        self.field(mentionsAll.map { $0 ? "t" : "f" })
        self.array(readers?.map(\.userId))
        self.array(readers?.map { $0.at?.text })
        self.array(receivers?.map(\.userId))
        self.array(receivers?.map { $0.at?.text })
        self.field(read.map { $0 ? "t" : "f" })
        self.field(at?.text)
        self.bytes.append(PostgresCopyText.rowEnd)
    }

    /// A field of the row (`PostgresCopyText` escapes it), or null.
    private mutating func field(_ value: String?) {
        self.bytes.append(PostgresCopyText.fieldSeparator)
        PostgresCopyText.appendField(value, to: &self.bytes)
    }

    /// An array field (nil elements: NULL), or null.
    private mutating func array(_ values: [String?]?) {
        self.bytes.append(PostgresCopyText.fieldSeparator)
        guard let values else { return PostgresCopyText.appendField(nil, to: &self.bytes) }
        PostgresCopyText.appendArrayField(values, to: &self.bytes)
    }

    private mutating func array(_ values: [String]?) {
        self.array(values.map { $0.map(Optional.some) })
    }
}
