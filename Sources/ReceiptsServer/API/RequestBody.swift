/// A JSON request body whose members are exactly its `CodingKeys`: a member it does not
/// know is 400 `invalid_request`, as the OpenAPI document says (`additionalProperties:
/// false`).
///
/// `JSONDecoder` skips unknown members, so a misspelt optional member would be dropped in
/// silence: `{"userId":"bob","messageID":["m1"]}` would mark everything read. Checked by
/// `RequestJSONDecoder`, which collects the body's members while looking for repeated ones.
protocol RequestBody: Decodable {
    associatedtype CodingKeys: CodingKey & CaseIterable
}

extension KeyedDecodingContainer {
    /// An optional member: absent is nil, but `null` is 400 like any other wrong type (the
    /// document says `integer`, not `[integer, null]`; `JSONDecoder`'s `decodeIfPresent`
    /// would take `null` for absent).
    func decodeUnlessAbsent<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value? {
        try self.contains(key) ? self.decode(Value.self, forKey: key) : nil
    }
}

extension RequestBody {
    /// Throws 400 when `members` names one that is not a coding key.
    static func requireKnown(members: Set<String>) throws {
        let known = Set(CodingKeys.allCases.map(\.stringValue))
        if let unknown = members.subtracting(known).min() {
            throw APIError.invalidRequest(
                "the body has an unknown member \"\(unknown)\" (it takes \(known.sorted().joined(separator: ", ")))")
        }
    }
}
