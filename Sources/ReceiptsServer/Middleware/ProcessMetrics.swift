import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The process's standard metrics (Prometheus's client libraries export them under these
/// names): CPU seconds, memory, open files and their limit, start time. Read from /proc at
/// each scrape; nil where there is no /proc (not Linux), and those metrics are left out.
struct ProcessMetrics {
    var cpuSeconds: Double
    var residentBytes: Double
    var virtualBytes: Double
    var openFiles: Int
    var maximumFiles: Int
    var startTime: Double

    static func now() -> ProcessMetrics? {
        #if os(Linux)
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"),
            let bootTime = Self.bootTime()
        else { return nil }
        // After the command's name: state (field 3), …, utime (14), stime (15), …,
        // starttime (22), vsize (23), rss (24).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 21, let user = Double(fields[11]), let system = Double(fields[12]),
            let started = Double(fields[19]), let virtual = Double(fields[20]), let resident = Double(fields[21])
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        var limit = rlimit()
        let maximumFiles = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(limit.rlim_cur) : 0
        let openFiles = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        return ProcessMetrics(
            cpuSeconds: (user + system) / ticks, residentBytes: resident * pageSize, virtualBytes: virtual,
            openFiles: openFiles, maximumFiles: maximumFiles, startTime: bootTime + started / ticks)
        #else
        return nil
        #endif
    }

    /// When the machine booted (`btime` of /proc/stat), seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Appends them in the Prometheus text format.
    func emit(into buffer: inout [UInt8]) {
        let metrics: [(name: String, type: String, help: String, value: String)] = [
            ("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", Self.format(self.cpuSeconds)),
            ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", Self.format(self.residentBytes)),
            ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", Self.format(self.virtualBytes)),
            ("process_open_fds", "gauge", "Number of open file descriptors.", String(self.openFiles)),
            ("process_max_fds", "gauge", "Maximum number of open file descriptors.", String(self.maximumFiles)),
            ("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", Self.format(self.startTime)),
        ]
        for metric in metrics {
            buffer.append(contentsOf: "# HELP \(metric.name) \(metric.help)\n# TYPE \(metric.name) \(metric.type)\n\(metric.name) \(metric.value)\n".utf8)
        }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
