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

    init(label: String) {
        self.stream = StreamLogHandler.standardError(label: label)
    }

    var logLevel: Logger.Level {
        get { self.stream.logLevel }
        set { self.stream.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { self.stream.metadataProvider }
        set { self.stream.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        if !self.metadata.isEmpty {
            event.metadata = self.metadata.merging(event.metadata ?? [:]) { _, explicit in explicit }
        }
        self.stream.log(event: event)
    }
}
