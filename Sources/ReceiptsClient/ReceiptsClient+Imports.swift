import Foundation
import OpenAPIRuntime

// The face, continued: importing a chat app's history (docs/api.md, "Importing history").

extension ReceiptsClient {
    public typealias ImportAccepted = Components.Schemas.ImportAccepted
    public typealias Import = Components.Schemas.Import

    /// Starts an import (tenant key): `ndjson` is its body, one JSON object a line (chats,
    /// messages with their readers, read positions). Answers once the whole body is stored;
    /// `importStatus(_:)` says how loading goes, `waitForImport(_:)` waits for its end.
    public func startImport(ndjson: Data) async throws -> ImportAccepted {
        try await self.startImport(body: HTTPBody(ndjson))
    }

    /// Starts an import from a file, streamed as it is read (a history may be far larger
    /// than what is worth holding in memory).
    public func startImport(contentsOf file: URL) async throws -> ImportAccepted {
        let handle = try FileHandle(forReadingFrom: file)
        let size = try file.resourceValues(forKeys: [.fileSizeKey]).fileSize
        let chunks = AsyncThrowingStream<ArraySlice<UInt8>, any Error> {
            guard let data = try handle.read(upToCount: 1 << 20), !data.isEmpty else {
                try? handle.close()
                return nil
            }
            return ArraySlice(data)
        }
        return try await self.startImport(body: HTTPBody(chunks, length: size.map { .known(Int64($0)) } ?? .unknown))
    }

    private func startImport(body: HTTPBody) async throws -> ImportAccepted {
        let output = try await Self.call { try await generated.createImport(body: .applicationXNdjson(body)) }
        guard case .accepted(let accepted) = output else { throw Self.unexpected(output, "createImport") }
        return try accepted.body.json
    }

    /// Where an import stands (tenant key): its state, what it imported, its first errors.
    public func importStatus(_ importID: String) async throws -> Import {
        try await Self.call { try await generated.getImport(path: .init(importId: importID)) }.ok.body.json
    }

    /// Waits until an import is done or failed (asking every `interval`), at most `timeout`.
    public func waitForImport(
        _ importID: String, every interval: Duration = .milliseconds(500), timeout: Duration = .seconds(600)
    ) async throws -> Import {
        let deadline = ContinuousClock.now + timeout
        while true {
            let status = try await self.importStatus(importID)
            if status.state != .running { return status }
            guard ContinuousClock.now + interval < deadline else { throw ImportStillRunning(importID: importID, waited: timeout) }
            try await Task.sleep(for: interval)
        }
    }
}

/// `waitForImport(_:)` waited as long as it was told and the import still runs (it goes on).
public struct ImportStillRunning: Error, Sendable, CustomStringConvertible {
    public let importID: String
    public let waited: Duration

    public var description: String { "import \(self.importID) is still running after \(self.waited)" }
}
