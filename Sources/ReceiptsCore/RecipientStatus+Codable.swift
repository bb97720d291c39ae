import Foundation

/// The JSON contract shows `"deliveredAt": null` and `"readAt": null`, so absent times are
/// encoded as explicit nulls instead of the synthesized omission. Dates are encoded as
/// `Date`, leaving their format to the caller's `JSONEncoder.dateEncodingStrategy`.
extension RecipientStatus: Codable {
    /// The contract's field names.
    enum CodingKeys: String, CodingKey {
        case userId, deliveredAt, readAt
    }

    /// Decodes a status; missing and `null` times both read as `nil`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            userId: try container.decode(String.self, forKey: .userId),
            deliveredAt: try container.decodeIfPresent(Date.self, forKey: .deliveredAt),
            readAt: try container.decodeIfPresent(Date.self, forKey: .readAt)
        )
    }

    /// Encodes every field, `nil` times as `null`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userId, forKey: .userId)
        if let deliveredAt {
            try container.encode(deliveredAt, forKey: .deliveredAt)
        } else {
            try container.encodeNil(forKey: .deliveredAt)
        }
        if let readAt {
            try container.encode(readAt, forKey: .readAt)
        } else {
            try container.encodeNil(forKey: .readAt)
        }
    }
}
