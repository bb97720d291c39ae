import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open files (`RLIMIT_NOFILE`): every connection, stream and
/// PostgreSQL session takes one.
enum FileLimit {
    /// Raises the soft limit to the hard one (a process may, without privileges) and returns
    /// the limit in effect afterwards.
    static func raiseToHardLimit() -> Int {
        // RLIM_INFINITY is all ones (`rlim_t.max`).
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_max != rlim_t.max, limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == rlim_t.max ? Int(Int32.max) : Int(clamping: limit.rlim_cur)
    }
}

/// The default cap on HTTP connections (`RECEIPTS_MAX_CONNECTIONS`): the open-file limit less a
/// reserve, so that the files the process needs besides its connections (PostgreSQL sessions,
/// webhook deliveries, event loops, files it reads, the connections answered past the cap)
/// never run out. Past the file limit a failed `accept` or `open` can end the process.
enum ConnectionCap {
    /// The files kept for everything but HTTP connections: a tenth of the limit, from 64 to
    /// 1,024, and one for each pooled PostgreSQL connection.
    static func reserve(fileLimit: Int, databasePoolSize: Int) -> Int {
        min(max(fileLimit / 10, 64), 1024) + databasePoolSize
    }

    /// `fileLimit` less the `reserve`; at least 1.
    static func defaultMaximum(fileLimit: Int, databasePoolSize: Int) -> Int {
        max(1, fileLimit - self.reserve(fileLimit: fileLimit, databasePoolSize: databasePoolSize))
    }

    /// Logs a warning when a configured cap leaves less than the reserve below the file limit.
    static func warnIfTooHigh(_ maximum: Int, fileLimit: Int, databasePoolSize: Int, logger: Logger) {
        let safe = self.defaultMaximum(fileLimit: fileLimit, databasePoolSize: databasePoolSize)
        guard maximum > safe else { return }
        logger.warning(
            "RECEIPTS_MAX_CONNECTIONS leaves too few files for PostgreSQL and webhooks below the open-file limit: at the limit the process can fail",
            metadata: ["receipts.maximum_connections": "\(maximum)", "open_file_limit": "\(fileLimit)", "safe_maximum": "\(safe)"])
    }
}
