-- A user's unread counts, per chat and in total, as GET /v1/users/{userId}/unread answers.
-- Usage: psql -v tenant=TENANT -v user=USER -f sql/admin/user_unread_counts.sql
-- Row-level security is forced (see sql/migrations/0001_baseline.sql): scope the session to the tenant.
SELECT set_config('receipts.tenant_id', :'tenant', false) \gset
SELECT chat_id, unread_count, marked_unread, muted
FROM receipts.unread_counts(:'tenant', :'user');

-- The total leaves muted chats out, as the app icon's badge does.
SELECT coalesce(sum(unread_count) FILTER (WHERE NOT muted), 0) AS total
FROM receipts.unread_counts(:'tenant', :'user');
