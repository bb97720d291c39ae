import Hummingbird
import ReceiptsStore

/// `/admin/v1`: tenant registration, behind the admin token.
struct AdminController {
    let registration: TenantRegistration

    func addRoutes(to group: RouterGroup<ReceiptsRequestContext>) {
        group.post("tenants", use: self.createTenant)
    }

    /// `POST /admin/v1/tenants`: creates a tenant and returns its API key, once.
    @Sendable func createTenant(_ request: Request, context: ReceiptsRequestContext) async throws -> EditedResponse<TenantResponse> {
        let body = try await request.decode(as: CreateTenantRequest.self, context: context)
        do {
            let tenant = try await self.registration.register(name: body.name)
            return EditedResponse(status: .created, response: TenantResponse(id: tenant.id, name: tenant.name, apiKey: tenant.apiKey))
        } catch TenantRegistration.Failure.invalidName {
            throw APIError.invalidRequest("name must be 1-200 characters")
        } catch TenantRegistration.Failure.idTaken {
            throw APIError.conflict("a tenant with this id exists; try again")
        }
    }
}
