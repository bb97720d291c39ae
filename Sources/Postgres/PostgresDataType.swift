/// A PostgreSQL type OID (`pg_type.oid`), as libpq reports it for columns and takes for
/// parameters.
public struct PostgresDataType: Hashable, Sendable, CustomStringConvertible {
    public let oid: UInt32

    public init(oid: UInt32) { self.oid = oid }

    /// Let the server infer the type from the statement (what psql does for literals).
    public static let unspecified = PostgresDataType(oid: 0)
    public static let bool = PostgresDataType(oid: 16)
    public static let bytea = PostgresDataType(oid: 17)
    public static let name = PostgresDataType(oid: 19)
    public static let int8 = PostgresDataType(oid: 20)
    public static let int2 = PostgresDataType(oid: 21)
    public static let int4 = PostgresDataType(oid: 23)
    public static let text = PostgresDataType(oid: 25)
    public static let oidType = PostgresDataType(oid: 26)
    public static let json = PostgresDataType(oid: 114)
    public static let float4 = PostgresDataType(oid: 700)
    public static let float8 = PostgresDataType(oid: 701)
    public static let unknown = PostgresDataType(oid: 705)
    public static let boolArray = PostgresDataType(oid: 1000)
    public static let int2Array = PostgresDataType(oid: 1005)
    public static let int4Array = PostgresDataType(oid: 1007)
    public static let textArray = PostgresDataType(oid: 1009)
    public static let bpchar = PostgresDataType(oid: 1042)
    public static let varchar = PostgresDataType(oid: 1043)
    public static let varcharArray = PostgresDataType(oid: 1015)
    public static let int8Array = PostgresDataType(oid: 1016)
    public static let float8Array = PostgresDataType(oid: 1022)
    public static let timestamp = PostgresDataType(oid: 1114)
    public static let timestamptz = PostgresDataType(oid: 1184)
    public static let timestamptzArray = PostgresDataType(oid: 1185)
    public static let uuid = PostgresDataType(oid: 2950)
    public static let uuidArray = PostgresDataType(oid: 2951)
    public static let jsonb = PostgresDataType(oid: 3802)
    public static let jsonbArray = PostgresDataType(oid: 3807)
    public static let xid8 = PostgresDataType(oid: 5069)

    /// The array type whose elements are of this type, for the types we encode.
    var arrayType: PostgresDataType? {
        switch self {
        case .bool: .boolArray
        case .int2: .int2Array
        case .int4: .int4Array
        case .int8: .int8Array
        case .text, .unspecified: .textArray
        case .varchar: .varcharArray
        case .float8: .float8Array
        case .timestamptz: .timestamptzArray
        case .uuid: .uuidArray
        case .jsonb: .jsonbArray
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .bool: "bool"
        case .int2: "int2"
        case .int4: "int4"
        case .int8: "int8"
        case .text: "text"
        case .varchar: "varchar"
        case .name: "name"
        case .float4: "float4"
        case .float8: "float8"
        case .timestamptz: "timestamptz"
        case .timestamp: "timestamp"
        case .uuid: "uuid"
        case .json: "json"
        case .jsonb: "jsonb"
        case .textArray: "text[]"
        case .int8Array: "int8[]"
        case .int4Array: "int4[]"
        case .unspecified: "unspecified"
        default: "oid \(self.oid)"
        }
    }
}
