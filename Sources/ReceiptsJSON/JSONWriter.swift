import Foundation
import ReceiptsStore

/// Writes a JSON answer byte by byte: every answer, so that its members come out in the
/// documented order (`JSONResponse`), and fast, for the answers too large or too frequent for
/// `JSONEncoder`: a page of 50 messages of a 1,000-member group carries about 100,000 ids in
/// `readBy` and `deliveredTo`, and `JSONEncoder` spent most of the request's time on them.
///
/// The caller writes the punctuation; the writer writes values as `JSONEncoder` would
/// (strings escaped, `nil` as `null`, dates in the contract's form, `JSONCoding.timestamp`).
package struct JSONWriter {
    /// The answer so far. An array of bytes rather than a `ByteBuffer`: its appends are
    /// inlined, where each of `ByteBuffer`'s writes checks its storage (written into a
    /// `ByteBuffer`, a large page spent a quarter of the service's time on it; with the array,
    /// 14 %); the answer is copied into a buffer once at the end.
    package private(set) var bytes: [UInt8] = []

    /// A writer whose buffer starts with room for `capacity` bytes (it grows as needed).
    package init(capacity: Int) {
        self.bytes.reserveCapacity(capacity)
    }

    /// JSON text as it is: punctuation and keys, `{"id":`.
    package mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
    }

    /// `text` as a JSON string, quotes included.
    package mutating func string(_ text: String) {
        var text = text
        // Ids and most texts need no escapes: one scan of their bytes, then one copy.
        text.withUTF8 { utf8 in
            if utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
                self.bytes.append(contentsOf: JSONString.quoted(String(decoding: utf8, as: UTF8.self)).utf8)
            } else {
                self.bytes.append(UInt8(ascii: "\""))
                self.bytes.append(contentsOf: utf8)
                self.bytes.append(UInt8(ascii: "\""))
            }
        }
    }

    /// `text` as a JSON string, or `null`.
    package mutating func string(_ text: String?) {
        if let text { self.string(text) } else { self.raw("null") }
    }

    /// `[…]` of JSON strings.
    ///
    /// A page of a large group's messages is mostly such lists (`readBy`, `deliveredTo`: some
    /// 100,000 ids): when none of the texts needs an escape, as ids never do, the list is
    /// written into one buffer of its exact size, byte by byte, and appended at once, which
    /// takes about a third of the time of an append per quote, id and comma.
    package mutating func strings(_ texts: [String]) {
        if let list = Self.plainList(texts) {
            self.bytes.append(contentsOf: list)
            return
        }
        self.raw("[")
        for (index, text) in texts.enumerated() {
            if index > 0 { self.raw(",") }
            self.string(text)
        }
        self.raw("]")
    }

    /// `texts` as a JSON array of strings, or nil when one of them needs an escape.
    private static func plainList(_ texts: [String]) -> [UInt8]? {
        var size = 2
        for text in texts { size += text.utf8.count + 3 }
        var isPlain = true
        let list = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var at = 0
            func put(_ byte: UInt8) {
                buffer[at] = byte
                at += 1
            }
            put(UInt8(ascii: "["))
            for var text in texts where isPlain {
                if at > 1 { put(UInt8(ascii: ",")) }
                put(UInt8(ascii: "\""))
                text.withUTF8 { utf8 in
                    for byte in utf8 {
                        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
                            isPlain = false
                            return
                        }
                        put(byte)
                    }
                }
                put(UInt8(ascii: "\""))
            }
            put(UInt8(ascii: "]"))
            count = isPlain ? at : 0
        }
        return isPlain ? list : nil
    }

    /// `[…]` of the ids of `list`: a list of the database's bytes written from them into one
    /// buffer of its exact size, then appended at once, as `strings(_:)` writes a list of plain
    /// strings: ids need no escapes, so each is copied whole (a list of `String`s, or one with
    /// something else in it, which the database's ids never are, goes through `strings(_:)`).
    package mutating func strings(_ list: UserIdList) {
        guard list.areStoredIdentifiers else { return self.strings(list.strings) }
        let count = list.count
        // Brackets, then each id with its quotes and, but for the first, a comma.
        let size = 2 + list.byteCount + 3 * count - (count > 0 ? 1 : 0)
        let written = [UInt8](unsafeUninitializedCapacity: size) { buffer, written in
            let start = UnsafeMutableRawPointer(buffer.baseAddress!)
            var at = 1
            buffer[0] = UInt8(ascii: "[")
            list.forEachUTF8 { id in
                if at > 1 {
                    buffer[at] = UInt8(ascii: ",")
                    at += 1
                }
                buffer[at] = UInt8(ascii: "\"")
                (start + at + 1).copyMemory(from: id.baseAddress!, byteCount: id.count)  // ids are never empty
                at += id.count + 1
                buffer[at] = UInt8(ascii: "\"")
                at += 1
            }
            buffer[at] = UInt8(ascii: "]")
            written = at + 1
            precondition(written == size, "the ids' bytes changed while they were written")
        }
        self.bytes.append(contentsOf: written)
    }

    package mutating func integer(_ value: some BinaryInteger) {
        self.bytes.append(contentsOf: String(value).utf8)
    }

    /// A number, as `JSONEncoder` writes it (a whole number without a fraction). JSON has no
    /// infinities and no NaN: those throw.
    package mutating func number(_ value: Double) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "JSON has no \(value)"))
        }
        if value.rounded() == value && abs(value) < 1e15 {
            self.integer(Int64(value))
        } else {
            self.bytes.append(contentsOf: String(value).utf8)
        }
    }

    /// `value` as JSON, written by `OrderedJSONEncoder`: members in the order it encodes them.
    package mutating func encode(_ value: some Encodable) throws {
        try OrderedJSONEncoder.write(value, to: &self)
    }

    package mutating func boolean(_ value: Bool) {
        if value { self.raw("true") } else { self.raw("false") }
    }

    /// The answer so far as text.
    package var text: String { String(decoding: self.bytes, as: UTF8.self) }

    /// The contract's timestamp as a JSON string, or `null`.
    package mutating func timestamp(_ date: Date?) {
        guard let date else { return self.raw("null") }
        self.bytes.append(UInt8(ascii: "\""))
        JSONCoding.appendTimestamp(date, to: &self.bytes)
        self.bytes.append(UInt8(ascii: "\""))
    }

    /// The members of the JSON object `object` (text as PostgreSQL writes a `jsonb`), each
    /// after a comma, as they are: for an object being written whose closing brace is still
    /// to come. Nothing for an empty object or a text that is not an object.
    package mutating func members(of object: String) {
        var object = object
        object.withUTF8 { utf8 in
            func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
            var start = utf8.startIndex
            var end = utf8.endIndex
            while start < end, isSpace(utf8[start]) { start += 1 }
            while end > start, isSpace(utf8[end - 1]) { end -= 1 }
            guard end - start >= 2, utf8[start] == UInt8(ascii: "{"), utf8[end - 1] == UInt8(ascii: "}") else { return }
            start += 1
            end -= 1
            while start < end, isSpace(utf8[start]) { start += 1 }
            while end > start, isSpace(utf8[end - 1]) { end -= 1 }
            guard start < end else { return }
            self.bytes.append(UInt8(ascii: ","))
            self.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<end]))
        }
    }
}
