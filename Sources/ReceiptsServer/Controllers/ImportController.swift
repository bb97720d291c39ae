import Foundation
import Hummingbird
import ReceiptsCore
import ReceiptsStore
import Synchronization

/// `/v1/imports`: a chat app's history loaded in bulk (docs/api.md, "Importing history").
///
/// `POST` stages the body as it arrives (`ReceiptsStore.stageImport`: parsed line by line
/// and COPY'd, never held whole) and answers 202 once all of it is in the database; the
/// import worker (`ImportService`) loads it from there, on any instance.
struct ImportController {
    /// The media types an import's body may declare (or none).
    static let mediaTypes: Set<String> = ["application/x-ndjson", "application/jsonl", "application/json-lines"]

    let store: ReceiptsStore
    let options: ReceiptsConfiguration.Imports
    /// Bodies arriving now, on this instance (each holds a database connection of its own).
    let uploads: ImportUploads
    /// Wakes this instance's import worker.
    let signal: WorkSignal

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("imports", use: self.create)
        group.get("imports/:importId", use: self.get)
    }

    @Sendable func create(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<ImportAcceptedResponse> {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "importing")
        if let declared = request.headers[.contentType] { try Self.requireNDJSON(declared) }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > self.options.maximumBytes {
            throw Self.tooLarge(self.options.maximumBytes)
        }
        guard self.uploads.enter(maximum: self.options.concurrentUploads) else {
            throw APIError(
                .serviceUnavailable, .unavailable,
                "this instance is taking \(self.options.concurrentUploads) imports already; retry after Retry-After seconds",
                headers: [.retryAfter: "5"])
        }
        defer { self.uploads.leave() }
        let id = GeneratedID.message()
        let staged: StagedImport
        do {
            staged = try await self.store.stageImport(
                tenant: principal.tenantId, id: id, body: request.body, maximumBytes: self.options.maximumBytes)
        } catch let error as ImportBodyError {
            switch error {
            case .tooLarge(let maximum): throw Self.tooLarge(maximum)
            case .notNDJSON(let why): throw APIError.invalidRequest(why)
            }
        }
        if staged.units > 0 { self.signal.signal() }
        return EditedResponse(
            status: .accepted, response: ImportAcceptedResponse(importId: id, state: staged.units > 0 ? "running" : "done"))
    }

    /// An import of the caller's tenant; another tenant's id is 404 as an unknown one is.
    @Sendable func get(_ request: Request, context: ReceiptsRequestContext) async throws -> ImportStateResponse {
        let principal = try context.requirePrincipal()
        try principal.requireTenantKey(for: "reading an import")
        let id = try Validation.pathId("importId", in: context)
        guard let state = try await self.store.importState(tenant: principal.tenantId, id: id) else {
            throw APIError.notFound("no import \(id)")
        }
        return ImportStateResponse(state)
    }

    static func requireNDJSON(_ declared: String) throws(APIError) {
        let type = declared.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
        guard !Self.mediaTypes.contains(type) else { return }
        throw APIError(
            .unsupportedMediaType, .unsupportedMediaType,
            "an import's body must be NDJSON (Content-Type: application/x-ndjson), not \(type.isEmpty ? "an empty type" : String(type.prefix(100)))")
    }

    static func tooLarge(_ maximum: Int) -> APIError {
        APIError(.contentTooLarge, .payloadTooLarge, "an import's body may hold at most \(maximum) bytes (RECEIPTS_IMPORT_MAX_BYTES)")
    }

    /// Whether a request is an import's upload, whose body this controller reads as it
    /// arrives (up to `RECEIPTS_IMPORT_MAX_BYTES`) instead of the 1 MiB every other body has.
    static func isUpload(_ request: Request) -> Bool {
        request.method == .post && request.uri.path == "/v1/imports"
    }
}

/// How many import bodies this instance is taking now, against a bound.
final class ImportUploads: Sendable {
    private let count = Mutex(0)

    init() {}

    /// Takes a place, unless `maximum` are taken.
    func enter(maximum: Int) -> Bool {
        self.count.withLock { count in
            guard count < maximum else { return false }
            count += 1
            return true
        }
    }

    func leave() {
        self.count.withLock { $0 -= 1 }
    }
}
