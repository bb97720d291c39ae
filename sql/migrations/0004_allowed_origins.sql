-- 0004: browsers (docs/web-clients.md). A tenant names the web origins
-- its web client runs on; a request from a browser on another origin is refused (403)
-- before it changes anything, and the answers to an allowed one carry CORS headers. The
-- list is checked on every browser request, on every instance: the service keeps it with
-- the directory of credentials, which every change reloads (sql/functions/origins.sql).

ALTER TABLE receipts.tenants ADD COLUMN allowed_origins text[] COLLATE "C" NOT NULL DEFAULT '{}'
    CHECK (cardinality(allowed_origins) <= 50);
COMMENT ON COLUMN receipts.tenants.allowed_origins IS
    'Web origins (scheme://host[:port], or scheme://*.domain) whose pages may use the tenant''s credentials from a browser, as PUT /v1/settings set them (validated and lowercased by the service).';
