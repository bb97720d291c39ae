import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Web clients in a real browser (headless Chromium through chromedriver;
/// docs/web-clients.md): a chat app's page on its own origin follows Receipts on another, and the demo
/// page works. One browser at a time (each test starts its own): the machine running the
/// suite has few cores.
@Suite("Web clients in a real browser", .serialized)
struct BrowserTests {
    @Test("a page of another origin gets SSE and WebSocket events and marks a read with a user token; another origin is refused")
    func crossOriginPage() async throws {
        try await TestService.run { api in
            try await WebClientPage.serve { pagePort in
                let tenant = try await api.createTenant()
                let pageOrigin = "http://127.0.0.1:\(pagePort)"
                let settings = try await api.request(.put, "/v1/settings", as: tenant.apiKey, json: ["allowedOrigins": [pageOrigin]])
                try #require(settings.status == .ok, "\(settings.body)")
                try await tenant.createChat("g", members: ["alice", "bob"])
                let token = try await tenant.token(for: "alice")
                let receipts = "http://127.0.0.1:\(api.port)"

                try await HeadlessBrowser.with { browser in
                    try await browser.open(pageOrigin + "/")
                    try await browser.run("startStreams(arguments[0], arguments[1])", [receipts, token])
                    try await browser.waitUntil("both streams to open", "return client.sseOpens > 0 && client.wsOpens > 0")

                    let sent = try await tenant.send(in: "g", from: "bob", text: "hello from bob")
                    let created = try await browser.waitUntil(
                        "message.created on both streams",
                        """
                        const seen = (events) => events.find((e) => e.type === "message.created");
                        const sse = seen(client.sse), ws = seen(client.ws);
                        return sse && ws ? [sse.messageIds, ws.messageIds] : null;
                        """)
                    #expect(created as? [[String]] == [[sent], [sent]])

                    // The read, marked from the page with the user's token (a preflight, then
                    // the POST), lands.
                    let read = try await browser.runAsync(
                        "call(...Array.from(arguments).slice(0, 5)).then(arguments[5])",
                        [receipts, token, "POST", "/v1/chats/g/read", ["userId": "alice"]]) as? [String: Any]
                    #expect(read?["status"] as? Int == 200, "\(String(describing: read))")
                    #expect(try await tenant.message(sent, in: "g", viewer: "bob").readBy == ["alice"])
                    try await browser.waitUntil(
                        "receipt.read on both streams",
                        "return client.sse.some((e) => e.type === 'receipt.read') && client.ws.some((e) => e.type === 'receipt.read')")
                    let unread = try await browser.runAsync(
                        "call(...Array.from(arguments).slice(0, 4)).then(arguments[4])",
                        [receipts, token, "GET", "/v1/users/alice/unread"]) as? [String: Any]
                    #expect(unread?["status"] as? Int == 200)
                    #expect((unread?["body"] as? String)?.contains(#""total":0"#) == true)
                    try await browser.run("stopStreams()")

                    // The same page from an origin the tenant does not allow (localhost is
                    // another host than 127.0.0.1): the browser gets nothing through.
                    let second = try await tenant.send(in: "g", from: "bob", text: "unread")
                    try await browser.open("http://localhost:\(pagePort)/")
                    let refused = try await browser.runAsync(
                        "call(...Array.from(arguments).slice(0, 5)).then(arguments[5])",
                        [receipts, token, "POST", "/v1/chats/g/read", ["userId": "alice"]]) as? [String: Any]
                    #expect(refused?["failed"] != nil, "\(String(describing: refused))")
                    #expect(try await tenant.message(second, in: "g", viewer: "bob").readBy.isEmpty, "a refused origin's read changed nothing")
                    try await browser.run("startStreams(arguments[0], arguments[1])", [receipts, token])
                    try await browser.waitUntil(
                        "both streams to be refused", "return client.sseErrors > 0 && client.wsCloses.length > 0")
                    let opened = try await browser.run("stopStreams(); return [client.sseOpens, client.wsOpens, client.sse.length, client.ws.length]")
                    #expect(opened as? [Int] == [0, 0, 0, 0])
                }
            }
        }
    }

    @Test("after a restart of receiptsd, the page's EventSource and WebSocket resume with every event once")
    func resumeAfterRestart() async throws {
        try await TestDatabase.ensureMigrated()
        let adminToken = TestDatabase.uniqueName("admin")
        let environment = ["DATABASE_URL": TestDatabase.url, "RECEIPTS_ADMIN_TOKEN": adminToken, "LOG_LEVEL": "error"]
        let first = try await ReceiptsdProcess.start(arguments: ["--no-migrate"], environment: environment)
        defer { first.kill() }
        let receipts = first.baseURL

        let apiKey = try #require(try await Self.send(.POST, receipts + "/admin/v1/tenants", as: adminToken, json: ["name": "restart"])["apiKey"] as? String)
        _ = try await Self.send(.PUT, receipts + "/v1/chats/g", as: apiKey, json: ["kind": "group", "members": ["alice", "bob"]])
        let token = try #require(try await Self.send(.POST, receipts + "/v1/tokens", as: apiKey, json: ["userId": "alice"])["token"] as? String)

        try await WebClientPage.serve { pagePort in
            let pageOrigin = "http://127.0.0.1:\(pagePort)"
            _ = try await Self.send(.PUT, receipts + "/v1/settings", as: apiKey, json: ["allowedOrigins": [pageOrigin]])
            try await HeadlessBrowser.with { browser in
                try await browser.open(pageOrigin + "/")
                try await browser.run("startStreams(arguments[0], arguments[1])", [receipts, token])
                try await browser.waitUntil("both streams to open", "return client.sseOpens > 0 && client.wsOpens > 0")
                var sent = [try await Self.sendMessage(receipts, apiKey, "before the restart")]
                try await browser.waitUntil(
                    "the first message on both streams",
                    "return client.sse.length >= 1 && client.ws.length >= 1")

                kill(first.process.processIdentifier, SIGTERM)
                let close = try await browser.waitUntil(
                    "the WebSocket to close", "return client.wsCloses.length > 0 ? client.wsCloses[0] : null") as? [String: Any]
                #expect(close?["code"] as? Int == 1001, "\(String(describing: close))")
                #expect((close?["reason"] as? String)?.isEmpty == false)
                let deadline = ContinuousClock.now + .seconds(15)
                while first.process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                try #require(!first.process.isRunning, "receiptsd still runs 15 s after SIGTERM")

                let second = try await ReceiptsdProcess.start(arguments: ["--no-migrate"], environment: environment, port: first.port)
                defer { second.kill() }
                // Sent at once, before the streams are back: they come with the resume.
                sent.append(try await Self.sendMessage(receipts, apiKey, "right after the restart"))
                try await browser.waitUntil(
                    "both streams to reconnect", within: .seconds(20), "return client.sseOpens > 1 && client.wsOpens > 1")
                sent.append(try await Self.sendMessage(receipts, apiKey, "live again"))

                let script = """
                    const created = (events) => events.filter((e) => e.type === "message.created").map((e) => e.messageIds[0]);
                    return created(client.sse).length >= 3 && created(client.ws).length >= 3
                        ? { sse: created(client.sse), ws: created(client.ws),
                            sseIds: client.sse.map((e) => e.id), wsIds: client.ws.map((e) => e.id), sseReopens: client.sseReopens }
                        : null;
                    """
                let seen = try #require(try await browser.waitUntil("all three messages on both streams", within: .seconds(15), script) as? [String: Any])
                // Give a duplicate the time to show, then look again.
                try await Task.sleep(for: .milliseconds(300))
                let settled = try #require(try await browser.run(script) as? [String: Any])
                #expect(settled["sse"] as? [String] == sent, "SSE: \(seen)")
                #expect(settled["ws"] as? [String] == sent, "WebSocket: \(seen)")
                for stream in ["sseIds", "wsIds"] {
                    let ids = settled[stream] as? [String] ?? []
                    #expect(Set(ids).count == ids.count, "\(stream) delivered an event twice: \(ids)")
                }

                // When the token stops being valid (revoked), the WebSocket closes with 1008.
                _ = try await Self.send(.POST, receipts + "/v1/users/alice/tokens/revoke", as: apiKey, json: [:])
                try await browser.waitUntil("the WebSocket to close with 1008", "return client.wsCloses.some((close) => close.code === 1008)")
                try await browser.run("stopStreams()")
            }
        }
    }

    @Test("the demo page: a message typed in one pane shows in the other, and reading it there changes the sender's ticks")
    func demoPage() async throws {
        try await Self.withDemo { browser, alice, bob in

            // In the group (alice, bob, carol): Alice writes, Bob reads: "Read by 1/2".
            try await Self.type("Hi both", in: alice, browser)
            try await browser.waitUntil(
                "Bob's group badge", "return \(bob).querySelector('.chat-tab[data-chat=demo-group] .badge').textContent === '1'")
            try await browser.waitUntil(
                "Bob's pane to show the message", "return \(bob).querySelector('.message.theirs.unread .text')?.textContent === 'Hi both'")
            try await browser.run("\(bob).querySelector('.mark-read').click()")
            try await browser.waitUntil(
                "Alice's counts label", "return \(alice).querySelector('.message.own .label.counts')?.textContent === 'Read by 1/2'")

            // Bob answers in the group; Alice does not read it yet (her badge stays).
            try await Self.type("Hello Alice", in: bob, browser)
            try await browser.waitUntil("Alice's badge", "return \(alice).querySelector('.total-badge').textContent === '1'")

            // In the direct chat: delivered at once (Bob's client acknowledges), read when Bob opens it.
            try await browser.run("\(alice).querySelector('.chat-tab[data-chat=demo-direct]').click()")
            try await browser.waitUntil("Alice's direct chat", "return \(alice).querySelector('.chat-tab.selected')?.dataset.chat === 'demo-direct'")
            try await Self.type("Lunch at noon?", in: alice, browser)
            try await browser.waitUntil(
                "Bob's direct badge", "return \(bob).querySelector('.chat-tab[data-chat=demo-direct] .badge').textContent === '1'")
            let delivered = try await browser.waitUntil(
                "Alice's ticks: delivered",
                "const t = \(alice).querySelector('.message.own .ticks'); return t && t.dataset.label !== 'Sent' ? t.dataset.label : null")
            #expect(delivered as? String == "Delivered")
            try await browser.run("\(bob).querySelector('.chat-tab[data-chat=demo-direct]').click()")
            try await browser.waitUntil("Alice's ticks: read", "return \(alice).querySelector('.message.own .ticks')?.dataset.label === 'Read'")
            let labels = try await browser.waitUntil(
                "Alice's three labels",
                """
                const receipt = \(alice).querySelector('.message.own .receipt');
                const time = receipt.querySelector('.imessage').textContent;
                return time.startsWith('Read at ') ? [receipt.querySelector('.ticks').textContent, receipt.querySelector('.counts').textContent, time] : null;
                """) as? [String]
            #expect(labels?.prefix(2) == ["✓✓", "Read"])
            #expect(labels?.last?.range(of: #"^Read at \d{1,2}:\d{2} (AM|PM)$"#, options: .regularExpression) != nil, "\(String(describing: labels))")
            try await browser.waitUntil("Bob's direct badge to clear", "return \(bob).querySelector('.chat-tab[data-chat=demo-direct] .badge').textContent === ''")

            try await Self.saveScreenshot(try await browser.screenshot())

            // The switch: over Server-Sent Events, the panes follow as well.
            try await browser.run("document.querySelector('input[value=sse]').click()")
            try await browser.waitUntil(
                "the panes on SSE",
                "return document.getElementById('status').dataset.status === 'live' && document.getElementById('status').textContent.includes('Server-Sent')")
            try await Self.type("Yes!", in: bob, browser)
            try await browser.waitUntil(
                "Alice's pane to show Bob's answer", "return Array.from(\(alice).querySelectorAll('.message.theirs .text')).some((t) => t.textContent === 'Yes!')")
            try await browser.waitUntil("Bob's ticks: delivered", "return \(bob).querySelector('.message.own .ticks')?.dataset.label === 'Delivered'")
        }
    }

    @Test("the demo page: a mention lights the other pane's mention badge, a reply shows in the thread under its root, and an edit changes the text in both panes with the receipt kept")
    func demoThreadsMentionsEdits() async throws {
        try await Self.withDemo { browser, alice, bob in

            // A mention: Bob's pane shows it marked, with the mention badges.
            try await Self.type("Lunch @bob?", in: alice, browser)
            try await browser.waitUntil("Bob's mention badge", "return \(bob).querySelector('.mention-badge').textContent === '@1'")
            try await browser.waitUntil(
                "the mention in Bob's pane", "return \(bob).querySelector('.message.mentions-me .text')?.textContent === 'Lunch @bob?'")
            #expect(try await browser.run("return \(bob).querySelector('.chat-tab[data-chat=demo-group] .badge.mention').textContent") as? String == "@")

            // A reply in its thread: under the root in both panes, with the root's summary.
            try await browser.run("\(bob).querySelector('.message.theirs .action.reply').click()")
            try await Self.type("Yes, at noon", in: bob, browser)
            try await browser.waitUntil(
                "the reply under the root in Alice's pane",
                "return \(alice).querySelector('.message.own .replies .message.reply .text')?.textContent === 'Yes, at noon'")
            try await browser.waitUntil(
                "the root's summary", "return \(alice).querySelector('.message.own .thread-summary')?.textContent === '1 reply'")

            // Bob reads; then Alice edits her message: the new text in both panes, the receipt kept.
            try await browser.run("\(bob).querySelector('.mark-read').click()")
            try await browser.waitUntil("Bob's mention badge to clear", "return \(bob).querySelector('.mention-badge').textContent === ''")
            try await browser.waitUntil(
                "Alice's counts label", "return \(alice).querySelector('.message.own .label.counts')?.textContent === 'Read by 1/2'")
            try await browser.run("\(alice).querySelector('.message.own .action.edit').click()")
            try await Self.type("Lunch at 12:30 @bob?", in: alice, browser)
            try await browser.waitUntil(
                "the edit in Bob's pane",
                "const m = \(bob).querySelector('.message.theirs:not(.reply)'); return m?.querySelector('.text').textContent === 'Lunch at 12:30 @bob?' && m.querySelector('.edited') !== null")
            try await browser.waitUntil(
                "the edit in Alice's pane with its receipt",
                "const m = \(alice).querySelector('.message.own'); return m?.querySelector('.text').textContent === 'Lunch at 12:30 @bob?' && m.querySelector('.label.counts').textContent === 'Read by 1/2'")
            // The edit is not unread again for Bob.
            #expect(try await browser.run("return \(bob).querySelector('.total-badge').textContent") as? String == "")
            try await Self.saveScreenshot(try await browser.screenshot(), named: "demo-threads.png")
        }
    }

    /// Runs `body` on the demo page of a receiptsd of its own (a demo tenant of its own), both
    /// panes live; `alice` and `bob` are the JavaScript expressions of their panes.
    private static func withDemo(_ body: @Sendable (HeadlessBrowser, _ alice: String, _ bob: String) async throws -> Void) async throws {
        try await TestDatabase.ensureMigrated()
        let demoTenant = TestDatabase.uniqueName("demo")
        try await TestDatabase.run(
            TestDatabase.receiptsdExecutable, arguments: ["tenant", "create", "Demo", "--id", demoTenant],
            environment: ["DATABASE_URL": TestDatabase.url])
        let service = try await ReceiptsdProcess.start(
            arguments: ["--no-migrate"],
            environment: ["DATABASE_URL": TestDatabase.url, "RECEIPTS_DEMO": "true", "RECEIPTS_DEMO_TENANT": demoTenant, "LOG_LEVEL": "error"])
        defer { service.kill() }

        try await HeadlessBrowser.with { browser in
            try await browser.open(service.baseURL + "/demo")
            try await browser.waitUntil("both panes to be live", "return document.getElementById('status').dataset.status === 'live'")
            try await body(browser, "document.querySelector('.pane[data-user=alice]')", "document.querySelector('.pane[data-user=bob]')")
        }
    }

    /// Types `text` into a pane's composer and sends it.
    private static func type(_ text: String, in pane: String, _ browser: HeadlessBrowser) async throws {
        try await browser.run(
            """
            const form = \(pane).querySelector('.composer');
            form.elements.text.value = arguments[0];
            form.requestSubmit();
            """, [text])
    }

    /// Keeps the demo's screenshot: under .build always, and as docs/images/demo.png (the
    /// documentation's) with RECEIPTS_UPDATE_SCREENSHOTS=1.
    private static func saveScreenshot(_ png: Data, named name: String = "demo.png") async throws {
        let directory = TestDatabase.packageRoot.appendingPathComponent(".build/browser-tests")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try png.write(to: directory.appendingPathComponent(name))
        if ProcessInfo.processInfo.environment["RECEIPTS_UPDATE_SCREENSHOTS"] == "1" {
            try png.write(to: TestDatabase.packageRoot.appendingPathComponent("docs/images").appendingPathComponent(name))
        }
    }

    private static func sendMessage(_ receipts: String, _ apiKey: String, _ text: String) async throws -> String {
        try #require(try await Self.send(.POST, receipts + "/v1/chats/g/messages", as: apiKey, json: ["senderId": "bob", "text": text])["id"] as? String)
    }

    /// Sends a JSON request and returns the JSON object answered.
    static func send(_ method: HTTPMethod, _ url: String, as credential: String, json: [String: Any]) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(credential)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 16)
        return (try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }
}
