import Foundation

/// CPU time used so far by the service, by PostgreSQL's processes and by the bench itself,
/// from /proc (Linux). A figure's CPU per request says what it costs whatever the speed of
/// the machine at that moment, which on a shared VM drifts by tens of percent.
struct CPUTimes {
    /// Seconds of CPU (user and system).
    var service: Double
    var postgres: Double
    var bench: Double

    /// Now; nil where /proc cannot be read. PostgreSQL counts only when it runs on this
    /// machine: every process named `postgres` (the sessions, the WAL writer, autovacuum).
    static func now(servicePID: Int32?) -> CPUTimes? {
        guard let bench = self.seconds(ofProcess: "self") else { return nil }
        let service = servicePID.flatMap { self.seconds(ofProcess: "\($0)") } ?? 0
        var postgres = 0.0
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
            if let (name, seconds) = self.nameAndSeconds(ofProcess: entry), name == "postgres" { postgres += seconds }
        }
        return CPUTimes(service: service, postgres: postgres, bench: bench)
    }

    /// What was used from `start` to now, per request (or per `unit`: "receipt"), as a note
    /// for the table.
    static func note(since start: CPUTimes?, servicePID: Int32?, requests: Int, unit: String = "request") -> String {
        guard let start, let end = self.now(servicePID: servicePID), requests > 0 else { return "" }
        func microseconds(_ seconds: Double) -> String { String(format: "%.0f", seconds / Double(requests) * 1_000_000) }
        return "CPU µs/\(unit): service \(microseconds(end.service - start.service)), "
            + "PostgreSQL \(microseconds(end.postgres - start.postgres)), bench \(microseconds(end.bench - start.bench))"
    }

    private static func seconds(ofProcess process: String) -> Double? {
        self.nameAndSeconds(ofProcess: process)?.seconds
    }

    /// The command name and utime + stime of /proc/<process>/stat.
    private static func nameAndSeconds(ofProcess process: String) -> (name: String, seconds: Double)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return nil }
        let name = String(stat[stat.index(after: open)..<close])
        // After the name: state (field 3), ..., utime (14), stime (15).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (name, (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
    }
}
