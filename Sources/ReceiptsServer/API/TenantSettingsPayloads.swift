/// `PUT /v1/settings` body.
struct TenantSettingsRequest: RequestBody {
    let allowedOrigins: [String]

    enum CodingKeys: String, CodingKey, CaseIterable { case allowedOrigins }
}

/// `{"allowedOrigins":[…]}`: `GET` and `PUT /v1/settings` answer.
struct TenantSettingsResponse: JSONResponse {
    let allowedOrigins: [String]

    func write(to json: inout JSONWriter) {
        json.raw(#"{"allowedOrigins":"#)
        json.strings(self.allowedOrigins)
        json.raw("}")
    }
}
