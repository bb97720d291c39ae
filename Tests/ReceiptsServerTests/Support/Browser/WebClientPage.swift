import Hummingbird
import HummingbirdTesting

/// A chat app's web client, as a test page served from an origin of its own (another port:
/// another origin), that follows Receipts with a user token over both stream kinds and calls
/// the API with `fetch`, as a web client would. What it saw is in `window.client`, for the
/// test to read.
enum WebClientPage {
    /// Serves the page at `/` on a free port of 127.0.0.1 and runs `body` with its port.
    static func serve<Result: Sendable>(_ body: @Sendable (Int) async throws -> Result) async throws -> Result {
        let router = Router()
        router.get("/") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "text/html; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: Self.html)))
        }
        router.get("favicon.ico") { _, _ in HTTPResponse.Status.noContent }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await app.test(.live) { client in try await body(client.port!) }
    }

    /// The page. `startStreams(base, token)` opens an EventSource and a WebSocket on Receipts
    /// at `base`; each resumes after a restart (EventSource by itself with Last-Event-ID, or
    /// reopened with `?after=` if the browser gave up; the WebSocket reopened with `?after=`).
    /// `call(base, token, method, path, body)` is a `fetch` that resolves to
    /// `{status, body}` or `{failed: message}` when the browser refused it (CORS).
    static let html = #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>A chat app's web client</title></head>
        <body><h1>Web client</h1>
        <script>
        "use strict";
        window.client = {
          sse: [], ws: [], sseOpens: 0, wsOpens: 0, sseErrors: 0, sseReopens: 0,
          wsCloses: [], lastSse: null, lastWs: null, stopped: false,
        };
        function openEventSource(base, token) {
          const c = window.client;
          const after = c.lastSse ? "&after=" + encodeURIComponent(c.lastSse) : "";
          const source = new EventSource(base + "/v1/events?token=" + encodeURIComponent(token) + after);
          c.source = source;
          source.onopen = () => { c.sseOpens += 1; };
          source.onmessage = (message) => {
            c.lastSse = message.lastEventId;
            c.sse.push(JSON.parse(message.data));
          };
          source.onerror = () => {
            c.sseErrors += 1;
            // Closed for good (the server answered something else than a stream): reopen.
            if (source.readyState === EventSource.CLOSED && !c.stopped) {
              c.sseReopens += 1;
              setTimeout(() => openEventSource(base, token), 200);
            }
          };
        }
        function openWebSocket(base, token) {
          const c = window.client;
          const after = c.lastWs ? "&after=" + encodeURIComponent(c.lastWs) : "";
          const socket = new WebSocket(base.replace(/^http/, "ws") + "/v1/stream?token=" + encodeURIComponent(token) + after);
          c.socket = socket;
          socket.onopen = () => { c.wsOpens += 1; };
          socket.onmessage = (message) => {
            const event = JSON.parse(message.data);
            if (event.id) c.lastWs = event.id;
            c.ws.push(event);
          };
          socket.onclose = (close) => {
            c.wsCloses.push({ code: close.code, reason: close.reason });
            if (!c.stopped) setTimeout(() => openWebSocket(base, token), 200);
          };
        }
        function startStreams(base, token) {
          openEventSource(base, token);
          openWebSocket(base, token);
        }
        function stopStreams() {
          const c = window.client;
          c.stopped = true;
          if (c.source) c.source.close();
          if (c.socket) c.socket.close();
        }
        async function call(base, token, method, path, body) {
          const headers = { Authorization: "Bearer " + token };
          if (body !== undefined) headers["Content-Type"] = "application/json";
          try {
            const response = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
            return { status: response.status, body: await response.text() };
          } catch (error) {
            return { failed: String(error) };
          }
        }
        </script></body></html>
        """#
}
