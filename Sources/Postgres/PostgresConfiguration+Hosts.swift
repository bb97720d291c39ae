internal import CLibPQ

extension PostgresConfiguration {
    /// One configuration per server that `connectionString` names: libpq's multi-host form
    /// (`postgresql://user@a:5432,b:5433/db?…` or `host=a,b port=5432,5433 …`) split into
    /// one connection string per host, each with every other setting of the original (user,
    /// password, database, TLS, …) and without `target_session_attrs` (which chooses among
    /// hosts; the caller checks each server's role itself). A single host gives one.
    ///
    /// - Throws: `PostgresError` (`.connectionFailed`) when libpq cannot parse the string,
    ///   or when its lists of hosts and ports do not pair up.
    public func eachHost() throws(PostgresError) -> [(server: String, configuration: PostgresConfiguration)] {
        var settings = try Self.parse(self.connectionString)
        settings["target_session_attrs"] = nil
        let hosts = Self.list(settings["host"])
        let addresses = Self.list(settings["hostaddr"])
        let ports = Self.list(settings["port"])
        let count = max(hosts.count, addresses.count, 1)
        for list in [hosts, addresses, ports] where list.count > 1 && list.count != count {
            throw PostgresError(
                code: .connectionFailed, message: "the connection string names \(count) hosts but \(list.count) of another list (host, hostaddr, port)")
        }
        return (0..<count).map { index in
            var one = settings
            // An empty entry (`a:5433,b`) is libpq's default for that host.
            func pick(_ list: [String], _ keyword: String) {
                if list.isEmpty { return }
                let value = list.count == 1 ? list[0] : list[index]
                one[keyword] = value.isEmpty ? nil : value
            }
            pick(hosts, "host")
            pick(addresses, "hostaddr")
            pick(ports, "port")
            var configuration = self
            configuration.connectionString = Self.keywordValueString(one)
            let host = one["host"] ?? one["hostaddr"] ?? "localhost"
            return (server: "\(host):\(one["port"] ?? "5432")", configuration: configuration)
        }
    }

    /// The settings a connection string gives (libpq's `PQconninfoParse`), defaults left out.
    private static func parse(_ connectionString: String) throws(PostgresError) -> [String: String] {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &error) else {
            let reason = error.map { String(cString: $0) } ?? "out of memory"
            if let error { PQfreemem(error) }
            throw PostgresError(code: .connectionFailed, message: "not a valid connection string: \(reason)")
        }
        defer { PQconninfoFree(options) }
        var settings: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                settings[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
        return settings
    }

    private static func list(_ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return value.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
    }

    /// `keyword='value' …`, quoted as libpq reads it (backslash before `\` and `'`), in a
    /// stable order.
    private static func keywordValueString(_ settings: [String: String]) -> String {
        settings.sorted { $0.key < $1.key }.map { keyword, value in
            var quoted = ""
            for character in value {
                if character == "\\" || character == "'" { quoted.append("\\") }
                quoted.append(character)
            }
            return "\(keyword)='\(quoted)'"
        }.joined(separator: " ")
    }
}
