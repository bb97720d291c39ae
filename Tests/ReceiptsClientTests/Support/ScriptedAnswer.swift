import Foundation
import HTTPTypes
import OpenAPIRuntime

/// The answers the service-less client tests' transports give: JSON with a status, and the
/// service's 503 for a database outage (what the client retries).
enum ScriptedAnswer {
    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> (HTTPResponse, HTTPBody?) {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return (HTTPResponse(status: status, headerFields: headers), HTTPBody(text))
    }

    /// A `text/event-stream` answer (an SSE stream's events).
    static func eventStream(_ text: String) -> (HTTPResponse, HTTPBody?) {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        return (HTTPResponse(status: .ok, headerFields: headers), HTTPBody(text))
    }

    static var notFound: (HTTPResponse, HTTPBody?) {
        json(#"{"error":{"code":"not_found","message":"no such route"}}"#, status: .notFound)
    }

    static var unavailable: (HTTPResponse, HTTPBody?) {
        json(#"{"error":{"code":"unavailable","message":"the database is unavailable"}}"#, status: .serviceUnavailable)
    }
}
