/// `PUT /v1/settings` body.
struct TenantSettingsRequest: RequestBody {
    let allowedOrigins: [String]

    enum CodingKeys: String, CodingKey, CaseIterable { case allowedOrigins }
}

/// `{"allowedOrigins":[…]}`: `GET` and `PUT /v1/settings` answer.
struct TenantSettingsResponse: JSONResponse {
    let allowedOrigins: [String]
}
