import ReceiptsStore

/// `202` answer of `POST /v1/imports`: `{"importId","state"}`.
struct ImportAcceptedResponse: JSONResponse {
    let importId: String
    let state: String
}

/// `GET /v1/imports/{importId}`: `{"importId","state","lines","imported":{"chats","messages",
/// "receipts"},"rejected","errors":[{"line","code","message"}…]}`.
struct ImportStateResponse: JSONResponse {
    struct Imported: Encodable {
        let chats: Int64
        let messages: Int64
        let receipts: Int64
    }

    struct LineError: Encodable {
        let line: Int64
        let code: String
        let message: String
    }

    let importId: String
    let state: String
    let lines: Int64
    let imported: Imported
    let rejected: Int64
    let errors: [LineError]

    init(_ state: ImportState) {
        self.importId = state.id
        self.state = state.phase.rawValue
        self.lines = state.lines
        self.imported = Imported(chats: state.chats, messages: state.messages, receipts: state.receipts)
        self.rejected = state.rejected
        self.errors = state.errors.map { LineError(line: $0.line, code: $0.code, message: $0.message) }
    }

    var estimatedJSONBytes: Int { 192 + self.errors.count * 128 }
}
