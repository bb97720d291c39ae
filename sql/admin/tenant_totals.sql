-- Per tenant: how much it stores and how much it is used.
-- Usage: psql -f sql/admin/tenant_totals.sql
-- Row-level security is forced (see sql/migrations/0001_baseline.sql): every tenant needs a member of
-- receipts_maintenance (the tables' owner is one) with receipts.all_tenants on.
SET receipts.all_tenants = on;
SELECT tenant.tenant_id, tenant.name, tenant.created_at,
       (SELECT count(*) FROM receipts.chats AS chat WHERE chat.tenant_id = tenant.tenant_id) AS chats,
       (SELECT count(*) FROM receipts.chat_members AS member
         WHERE member.tenant_id = tenant.tenant_id AND member.left_at IS NULL) AS current_members,
       (SELECT count(*) FROM receipts.messages AS message WHERE message.tenant_id = tenant.tenant_id) AS messages,
       (SELECT coalesce(sum(cardinality(receipt.read_by) + cardinality(receipt.hidden_read_by)), 0)
          FROM receipts.receipt_chunks AS receipt WHERE receipt.tenant_id = tenant.tenant_id) AS reads,
       (SELECT coalesce(sum(cardinality(receipt.delivered_to)), 0)
          FROM receipts.receipt_chunks AS receipt WHERE receipt.tenant_id = tenant.tenant_id) AS deliveries,
       (SELECT count(*) FROM receipts.events AS event WHERE event.tenant_id = tenant.tenant_id) AS events
FROM receipts.tenants AS tenant
ORDER BY tenant.created_at;
