import Foundation

/// Refuses a JSON body in which an object names a key twice.
///
/// `JSONDecoder` keeps one of the values and drops the other without a word, so
/// `{"userId":"a","userId":"b"}` would act for a user the caller may never have meant; the
/// contract answers such a body 400. One pass over the raw bytes, before decoding: it
/// follows strings and brackets only (the decoder judges everything else), collects the
/// keys of each open object, and bounds the nesting, so that its cost stays linear in the
/// body (at most 1 MiB) and its memory in the number of keys.
enum JSONObjectKeys {
    /// Deeper nesting is refused; the contract's bodies nest two levels.
    static let maximumDepth = 32

    /// Throws 400 `invalid_request` when an object repeats a key or the body nests deeper
    /// than `maximumDepth`. Malformed JSON passes: the decoder reports it.
    ///
    /// - Returns: the keys of the outermost object (none when the body is not an object),
    ///   for `RequestBody`'s check of unknown members.
    @discardableResult
    static func requireUnique(in bytes: UnsafeRawBufferPointer) throws -> Set<String> {
        var outermostKeys: Set<String> = []
        // One entry per open object or array: the keys seen so far (objects only) and
        // whether the next string is a key.
        var isObject: [Bool] = []
        var expectsKey: [Bool] = []
        var keys: [Set<String>] = []
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                guard let end = endOfString(in: bytes, from: index) else { return outermostKeys }
                if let top = isObject.indices.last, isObject[top], expectsKey[top] {
                    expectsKey[top] = false
                    guard let key = decodedKey(bytes[(index + 1)..<end]) else { return outermostKeys }
                    guard keys[top].insert(key).inserted else {
                        throw APIError.invalidRequest("the JSON body names the key \"\(key)\" twice in one object")
                    }
                    if top == 0 { outermostKeys.insert(key) }
                }
                index = end
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard isObject.count < maximumDepth else {
                    throw APIError.invalidRequest("the JSON body nests deeper than \(maximumDepth) levels")
                }
                let object = bytes[index] == UInt8(ascii: "{")
                isObject.append(object)
                expectsKey.append(object)
                keys.append([])
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard !isObject.isEmpty else { return outermostKeys }
                isObject.removeLast()
                expectsKey.removeLast()
                keys.removeLast()
            case UInt8(ascii: ","):
                if let top = isObject.indices.last, isObject[top] { expectsKey[top] = true }
            default:
                break
            }
            index += 1
        }
        return outermostKeys
    }

    /// The index of the quote closing the string that opens at `start`; nil if it never closes.
    private static func endOfString(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""): return index
            case UInt8(ascii: "\\"): index += 2
            default: index += 1
            }
        }
        return nil
    }

    /// A key as the decoder sees it: escapes resolved (`"\u0061"` is `"a"`). Compared as a
    /// Swift `String`, as the decoder's dictionary compares them. Nil for a malformed escape.
    private static func decodedKey(_ raw: Slice<UnsafeRawBufferPointer>) -> String? {
        guard raw.contains(UInt8(ascii: "\\")) else { return String(decoding: raw, as: UTF8.self) }
        let quoted = Data([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")])
        return try? JSONSerialization.jsonObject(with: quoted, options: .fragmentsAllowed) as? String
    }
}
