import ArgumentParser
import Foundation
import Logging
import NIOCore
import Postgres
import ReceiptsServer
import ReceiptsStore

#if canImport(Glibc)
import Glibc
#endif

/// `receiptsd import FILE --tenant ID`: a chat app's history, loaded from a shell as
/// `POST /v1/imports` loads it (docs/api.md, "Importing history"), with a progress bar on a
/// terminal and a summary at the end.
///
/// This process stages the file and loads it itself, holding the import's lease; stopped
/// halfway, it leaves the import running, and a service instance on the same database goes
/// on with it once the lease has run out (two minutes), from the group it had reached.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import a chat app's history (NDJSON: chats, messages with their readers, read positions).",
        discussion: "The file holds one JSON object a line, as POST /v1/imports takes it (docs/api.md, \"Importing history\"). Use - for standard input.")

    @Argument(help: "The NDJSON file, or - for standard input.")
    var file: String

    @Option(help: "The tenant the history belongs to.")
    var tenant: String

    @Option(help: "Largest file taken, in bytes (default: RECEIPTS_IMPORT_MAX_BYTES).")
    var maxBytes: Int?

    @Option(help: "After each group of chats, pause this many times as long as it took, so that other tenants keep the database (0: no pause, as fast as it goes).")
    var pace: Int = ReceiptsConfiguration.Imports().pauseFactor

    func run() async throws {
        let environment = Environment()
        let logger = makeLogger(level: environment.logLevel())
        let maximumBytes = try self.maxBytes ?? environment.integer(.importMaximumBytes)
        let input = try ImportInput(path: self.file)
        let pool = PostgresConnectionPool(
            configuration: PostgresConfiguration(
                connectionString: try environment.databaseURL(logger: logger), applicationName: "receiptsd-import",
                role: ReceiptsStore.serviceRole),
            options: .init(maximumConnections: 2), logger: logger)
        do {
            try await self.run(input: input, maximumBytes: maximumBytes, store: ReceiptsStore(pool: pool, logger: logger))
            await pool.close()
        } catch {
            await pool.close()
            throw error
        }
    }

    private func run(input: ImportInput, maximumBytes: Int, store: ReceiptsStore) async throws {
        let options = ReceiptsConfiguration.Imports()
        guard try await store.tokenSecrets(tenant: self.tenant) != nil else {
            throw ValidationError("there is no tenant \(self.tenant)")
        }

        let progress = ProgressBar(enabled: isatty(STDERR_FILENO) == 1)
        let started = ContinuousClock.now
        let id = "cli-" + UUID().uuidString.lowercased()
        let owner = "receiptsd-import-\(ProcessInfo.processInfo.processIdentifier)"
        let staged: StagedImport
        do {
            staged = try await store.stageImport(
                tenant: self.tenant, id: id, body: input.chunks, maximumBytes: maximumBytes, owner: (owner, options.lease)
            ) { bytes in
                progress.show("reading", done: Double(bytes), of: input.size.map(Double.init), unit: "MB", scale: 1_000_000)
            }
        } catch let error as ImportBodyError {
            progress.finish()
            switch error {
            case .tooLarge(let maximum): throw ValidationError("the file is larger than \(maximum) bytes (--max-bytes)")
            case .notNDJSON(let why): throw ValidationError(why)
            }
        }
        progress.finish()
        let stagedAt = ContinuousClock.now

        var loaded = 0
        while loaded < staged.units {
            let groupStarted = ContinuousClock.now
            switch try await store.loadImportGroup(
                tenant: self.tenant, id: id, owner: owner, lease: options.lease, maximumRows: options.groupRows)
            {
            case .loaded(let unitsLoaded, _): loaded = unitsLoaded
            case .done: loaded = staged.units
            case .notHolder: throw ValidationError("the import \(id) was taken over by another process")
            }
            progress.show("loading", done: Double(loaded), of: Double(staged.units), unit: "chats", scale: 1)
            // Paced as the service paces it (unless told otherwise): other tenants keep most of the database.
            if loaded < staged.units && self.pace > 0 {
                try await Task.sleep(for: (ContinuousClock.now - groupStarted) * self.pace)
            }
        }
        progress.finish()

        guard let state = try await store.importState(tenant: self.tenant, id: id) else { return }
        print(Self.summary(of: state, staging: stagedAt - started, loading: ContinuousClock.now - stagedAt))
    }

    static func summary(of state: ImportState, staging: Duration, loading: Duration) -> String {
        func seconds(_ duration: Duration) -> String {
            String(format: "%.1f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        }
        var lines = [
            "import \(state.id): \(state.phase.rawValue) in \(seconds(staging + loading)) s (reading \(seconds(staging)) s, loading \(seconds(loading)) s)",
            "  lines:    \(state.lines)",
            "  imported: \(state.chats) chats, \(state.messages) messages, \(state.receipts) receipts",
            "  rejected: \(state.rejected) lines",
        ]
        for error in state.errors.prefix(20) {
            lines.append("    line \(error.line): \(error.code): \(error.message)")
        }
        if state.errors.count > 20 || state.rejected > Int64(state.errors.count) {
            lines.append("    … (GET /v1/imports/\(state.id) lists the first 100)")
        }
        if let failure = state.failure { lines.append("  failed:   \(failure)") }
        return lines.joined(separator: "\n")
    }
}

/// The file to import, read in chunks of 1 MiB (a file or standard input; its size when known).
struct ImportInput {
    let handle: FileHandle
    let size: Int?

    init(path: String) throws {
        if path == "-" {
            self.handle = FileHandle.standardInput
            self.size = nil
        } else {
            guard let handle = FileHandle(forReadingAtPath: path) else { throw ValidationError("cannot read \(path)") }
            self.handle = handle
            self.size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        }
    }

    /// The file's bytes, read on a thread of their own (a read blocks).
    var chunks: AsyncThrowingStream<ByteBuffer, any Error> {
        let handle = self.handle
        let (stream, continuation) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream(bufferingPolicy: .bufferingOldest(4))
        let thread = Thread {
            do {
                while let data = try handle.read(upToCount: 1 << 20), !data.isEmpty {
                    // Waits while the consumer is 4 chunks behind: the file is never held whole.
                    while case .dropped = continuation.yield(ByteBuffer(bytes: data)) {
                        Thread.sleep(forTimeInterval: 0.005)
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.start()
        return stream
    }
}

/// A one-line progress bar on standard error, when it is a terminal.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private var lastDrawn = ContinuousClock.now - .seconds(1)
    private var drawn = false

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ phase: String, done: Double, of total: Double?, unit: String, scale: Double) {
        guard self.enabled, ContinuousClock.now - self.lastDrawn >= .milliseconds(100) || done == total else { return }
        self.lastDrawn = ContinuousClock.now
        self.drawn = true
        var line = "\r\(phase.padding(toLength: 8, withPad: " ", startingAt: 0)) "
        if let total, total > 0 {
            let fraction = min(1, done / total)
            let filled = Int(fraction * 30)
            line += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled) + "] "
            line += String(format: scale == 1 ? "%3.0f%%  %.0f/%.0f %@" : "%3.0f%%  %.1f/%.1f %@", fraction * 100, done / scale, total / scale, unit)
        } else {
            line += String(format: "%.0f %@", done / scale, unit)
        }
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        guard self.enabled, self.drawn else { return }
        self.drawn = false
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
