import NIOCore

/// Why an import's body was refused as a whole (nothing of it staged).
public enum ImportBodyError: Error, Sendable, Equatable {
    /// More than the limit (`RECEIPTS_IMPORT_MAX_BYTES`): 413.
    case tooLarge(maximumBytes: Int)
    /// Its first line is no JSON object, or it has no line at all: 400.
    case notNDJSON(String)
}

/// Turns an import's body, chunk by chunk as it arrives, into staged rows (`ImportRows`): it
/// splits the lines, parses each (`ImportLineParser`), and counts the lines and those
/// rejected, keeping the first 100 errors.
///
/// Bounded: a chunk's rows are taken by the caller (`takeRows`) before the next; a line over
/// `maximumLineBytes` is rejected without being held; the body stops at `maximumBytes`.
struct ImportStager {
    /// The longest line taken (a message line that lists a group's 10,000 readers with their
    /// times is about 600 KB).
    static let maximumLineBytes = 4 * 1024 * 1024
    /// How many errors are kept (the contract's "first 100").
    static let keptErrors = 100

    let maximumBytes: Int
    private let parser = ImportLineParser()
    private var rows: ImportRows
    private(set) var bytesRead = 0
    private(set) var lines: Int64 = 0
    private(set) var rejected: Int64 = 0
    private(set) var errors: [ImportLineError] = []
    /// The start of a line whose end has not come yet.
    private var pending: [UInt8] = []
    /// The line being read is over `maximumLineBytes`: the rest of it is passed over.
    private var skippingLongLine = false
    /// A line with content was seen (the first decides whether the body is NDJSON at all).
    private var sawContent = false

    init(tenant: String, importId: String, maximumBytes: Int) {
        self.maximumBytes = maximumBytes
        self.rows = ImportRows(tenant: tenant, importId: importId)
    }

    /// The staged rows of the lines read so far, handed over (for the COPY).
    mutating func takeRows() -> [UInt8] {
        defer { self.rows.bytes.removeAll(keepingCapacity: true) }
        return self.rows.bytes
    }

    var rowBytes: Int { self.rows.bytes.count }

    /// Reads the next chunk of the body.
    mutating func consume(_ chunk: ByteBuffer) throws(ImportBodyError) {
        self.bytesRead += chunk.readableBytes
        guard self.bytesRead <= self.maximumBytes else { throw .tooLarge(maximumBytes: self.maximumBytes) }
        var view = chunk.readableBytesView[...]
        while let end = view.firstIndex(of: UInt8(ascii: "\n")) {
            try self.complete(view[..<end])
            view = view[(end + 1)...]
        }
        self.hold(view)
    }

    /// The end of the body: its last line, if it has no newline after it.
    mutating func finish() throws(ImportBodyError) {
        if !self.pending.isEmpty || self.skippingLongLine {
            try self.complete(ByteBufferView())
        }
        guard self.sawContent else { throw .notNDJSON("the body holds no line") }
    }

    private mutating func hold(_ bytes: ByteBufferView) {
        guard !self.skippingLongLine else { return }
        if self.pending.count + bytes.count > Self.maximumLineBytes {
            self.skippingLongLine = true
            self.pending = []
        } else {
            self.pending.append(contentsOf: bytes)
        }
    }

    /// A line has ended with `tail` (its bytes before are in `pending`).
    private mutating func complete(_ tail: ByteBufferView) throws(ImportBodyError) {
        self.lines += 1
        let number = self.lines
        if self.skippingLongLine || self.pending.count + tail.count > Self.maximumLineBytes {
            self.skippingLongLine = false
            self.pending = []
            self.sawContent = true
            self.reject(ImportLineError(line: number, code: "invalid_line", message: "the line is longer than 4 MiB"))
            return
        }
        var line = self.pending
        line.append(contentsOf: tail)
        self.pending.removeAll(keepingCapacity: true)
        // Blank lines (a trailing newline, a \r\n's \r) count as lines but hold nothing.
        while let last = line.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
            line.removeLast()
        }
        guard line.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return }
        switch self.parser.parse(line, line: number) {
        case .success(let parsed):
            self.sawContent = true
            self.rows.append(parsed, number: number)
        case .failure(let error):
            if !self.sawContent && error.code == "invalid_json" {
                throw .notNDJSON("line \(number) is not a JSON object: the body must be NDJSON, one JSON object a line")
            }
            self.sawContent = true
            self.reject(error)
        }
    }

    private mutating func reject(_ error: ImportLineError) {
        self.rejected += 1
        if self.errors.count < Self.keptErrors { self.errors.append(error) }
    }
}
