import Testing

@testable import ReceiptsServer

@Suite("Repeated JSON keys")
struct JSONObjectKeysTests {
    static func check(_ json: String) -> Bool {
        var bytes = Array(json.utf8)
        return bytes.withUnsafeMutableBytes { buffer in
            (try? JSONObjectKeys.requireUnique(in: UnsafeRawBufferPointer(buffer))) != nil
        }
    }

    @Test("repeated keys in one object are refused, however they are written")
    func repeated() {
        #expect(!Self.check(#"{"a":1,"a":2}"#))
        #expect(!Self.check(#"{"a":1,"b":{"c":1},"a":2}"#))
        #expect(!Self.check(#"{"x":{"a":1,"a":2}}"#))
        #expect(!Self.check(#"[{"a":1},{"b":1,"b":1}]"#))
        #expect(!Self.check(#"{"a":1,"\u0061":2}"#))
        #expect(!Self.check("{ \"a\"\n:\t1 ,\r\n \"a\" : 2 }"))
        // Canonically equivalent, as the decoder's dictionary sees it: é precomposed and not.
        #expect(!Self.check("{\"\u{e9}\":1,\"e\u{301}\":2}"))
    }

    @Test("distinct keys, the same key in different objects, and look-alikes inside strings pass")
    func distinct() {
        #expect(Self.check(#"{"a":1,"b":2}"#))
        #expect(Self.check(#"{"a":{"a":{"a":1}}}"#))
        #expect(Self.check(#"[{"a":1},{"a":2}]"#))
        #expect(Self.check(#"{"a":"\"a\":1,\"a\":2","b":"{\"a\""}"#))
        #expect(Self.check(#"{"a":["a","a"],"b":"a"}"#))
        #expect(Self.check(#"{"a\\":1,"a":2}"#))
        #expect(Self.check(#"{}"#))
        #expect(Self.check(#""a""#))
    }

    @Test("malformed JSON is left to the decoder; deep nesting is refused")
    func malformedAndDeep() {
        #expect(Self.check(#"{"a":1,"a"#))
        #expect(Self.check(#"}}}]]"#))
        #expect(Self.check(#"{"a\"#))
        #expect(Self.check(String(repeating: "[", count: JSONObjectKeys.maximumDepth)))
        #expect(!Self.check(String(repeating: "[", count: JSONObjectKeys.maximumDepth + 1)))
        #expect(!Self.check(String(repeating: #"{"a":"#, count: 100)))
    }
}
