import Logging

/// Swift Log's `StreamLogHandler` on standard error, with the logger's metadata formatted
/// only when a line is written.
///
/// `StreamLogHandler` formats its metadata each time the metadata changes. Hummingbird sets a
/// request id on every request's logger, so the service formatted metadata for each request
/// (about 3 % of its CPU under load, perf) for lines that, at the default level, are never
/// written. The lines written are the same.
struct StandardErrorLogHandler: LogHandler {
    private var stream: StreamLogHandler
    var metadata: Logger.Metadata = [:]
    /// Kept here rather than in `stream`, so that its values rank between the logger's
    /// metadata and a line's own, as in `StreamLogHandler`.
    var metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider

    init(label: String) {
        self.stream = StreamLogHandler.standardError(label: label, metadataProvider: nil)
    }

    var logLevel: Logger.Level {
        get { self.stream.logLevel }
        set { self.stream.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var metadata = self.metadata
        if let provided = self.metadataProvider?.get() {
            metadata.merge(provided) { _, provided in provided }
        }
        var event = event
        if !metadata.isEmpty {
            event.metadata = metadata.merging(event.metadata ?? [:]) { _, explicit in explicit }
        }
        self.stream.log(event: event)
    }
}
