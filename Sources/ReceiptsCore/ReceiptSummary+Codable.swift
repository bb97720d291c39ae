import Foundation

/// The JSON contract spells out `"readAt": null` and `"label": null`, so absent values are
/// encoded as explicit nulls instead of the synthesized omission. Dates are encoded as
/// `Date`, leaving their format to the caller's `JSONEncoder.dateEncodingStrategy`.
extension ReceiptSummary: Codable {
    /// The contract's field names.
    enum CodingKeys: String, CodingKey {
        case state, recipients, delivered, read, readAt, label
    }

    /// Decodes a summary; missing and `null` optional fields both read as `nil`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            state: try container.decode(ReceiptState.self, forKey: .state),
            recipients: try container.decode(Int.self, forKey: .recipients),
            delivered: try container.decode(Int.self, forKey: .delivered),
            read: try container.decode(Int.self, forKey: .read),
            readAt: try container.decodeIfPresent(Date.self, forKey: .readAt),
            label: try container.decodeIfPresent(String.self, forKey: .label)
        )
    }

    /// Encodes every field, `nil` ones as `null`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(state, forKey: .state)
        try container.encode(recipients, forKey: .recipients)
        try container.encode(delivered, forKey: .delivered)
        try container.encode(read, forKey: .read)
        if let readAt {
            try container.encode(readAt, forKey: .readAt)
        } else {
            try container.encodeNil(forKey: .readAt)
        }
        if let label {
            try container.encode(label, forKey: .label)
        } else {
            try container.encodeNil(forKey: .label)
        }
    }
}
