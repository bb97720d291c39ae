import Logging
import NIOCore
import Postgres
import ReceiptsStore
import ServiceLifecycle

/// Loads staged imports (`POST /v1/imports`) in the background: it claims one running import
/// at a time (a lease in PostgreSQL, renewed by every group), loads it a group of chats per
/// transaction (`ReceiptsStore.loadImportGroup`), and pauses after each group for as long as
/// it took times `pauseFactor` (`PacedWork`), so that other tenants' requests keep most of
/// the database. An import whose instance stopped is taken over by another once its lease
/// has expired, from the group it had reached.
struct ImportService: Service {
    let store: ReceiptsStore
    let signal: WorkSignal
    let options: ReceiptsConfiguration.Imports
    /// This instance's name in the leases.
    let holder: String
    let logger: Logger

    func run() async throws {
        let pacing = PacedWork(pause: .milliseconds(10), pauseFactor: self.options.pauseFactor, pollInterval: self.options.pollInterval)
        await pacing.run(signal: self.signal, logger: self.logger, failure: "loading an import failed") {
            try await self.step()
        }
        // Stopping (a group under way was rolled back): the import goes back at once, for
        // another instance to go on with. Should this fail, the lease runs out on its own.
        do {
            try await PostgresDeadline.within(.seconds(2)) { try await self.store.releaseImports(owner: self.holder) }
        } catch {
            self.logger.debug("giving back an import's lease failed", metadata: ["error": "\(error)"])
        }
    }

    /// One group of the import this instance holds (or takes); false when there is none.
    private func step() async throws -> Bool {
        guard let claimed = try await self.store.claimImport(owner: self.holder, lease: self.options.lease) else { return false }
        let outcome: ImportGroupOutcome
        do {
            outcome = try await self.store.loadImportGroup(
                tenant: claimed.tenant, id: claimed.id, owner: self.holder, lease: self.options.lease,
                maximumRows: self.options.groupRows)
        } catch let error as PostgresError where error.code == .server && !error.isUnavailability {
            // The database refused the group itself (a value of its rows, a limit), not
            // because it is down or busy (that is retried): the same group would fail again,
            // so the import ends, saying why.
            self.logger.error("an import failed", metadata: ["receipts.import": "\(claimed.id)", "error": "\(error)"])
            try await self.store.failImport(tenant: claimed.tenant, id: claimed.id, failure: "\(error.message)")
            return true
        }
        switch outcome {
        case .loaded(let loaded, let units):
            self.logger.debug("loaded a group of an import", metadata: ["receipts.import": "\(claimed.id)", "receipts.units": "\(loaded)/\(units)"])
        case .done(let units):
            self.logger.info("an import is done", metadata: ["receipts.import": "\(claimed.id)", "receipts.chats": "\(units)"])
        case .notHolder:
            break
        }
        return true
    }
}
