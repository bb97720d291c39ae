import Foundation

/// JSON string literals for hand-written answers.
package enum JSONString {
    /// `text` as a JSON string, quotes included.
    package static func quoted(_ text: String) -> String {
        // Ids and most texts need no escapes: one scan of their bytes, then one copy.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
            return "\"" + text + "\""
        }
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\r": quoted += "\\r"
            case "\t": quoted += "\\t"
            case _ where scalar.value < 0x20: quoted += String(format: "\\u%04x", scalar.value)
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}
