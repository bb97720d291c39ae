-- Who a message reached and who read it, and when. Reads made with read receipts off are
-- listed as hidden (the service never shows them to anyone). A message's receipts are in
-- its rows of receipts.receipt_chunks, one per chunk of 32 members.
-- Usage: psql -v tenant=TENANT -v chat=CHAT -v message=MESSAGE -f sql/admin/message_readers.sql
-- Row-level security is forced (see sql/migrations/0001_baseline.sql): scope the session to the tenant.
SELECT set_config('receipts.tenant_id', :'tenant', false) \gset
SELECT message.seq, message.sender_id, message.created_at,
       recipient.user_id,
       delivery.delivered_at,
       reading.read_at,
       recipient.user_id = ANY (receipt.hidden_read_by) AS read_hidden
FROM receipts.messages AS message
JOIN receipts.receipt_chunks AS receipt
    ON receipt.tenant_id = message.tenant_id AND receipt.chat_id = message.chat_id AND receipt.seq = message.seq
CROSS JOIN LATERAL (
    SELECT DISTINCT user_id
    FROM unnest(receipt.delivered_to || receipt.read_by || receipt.hidden_read_by) AS user_id
) AS recipient
LEFT JOIN LATERAL (
    SELECT delivered.at AS delivered_at
    FROM unnest(receipt.delivered_to, receipt.delivered_at) AS delivered (user_id, at)
    WHERE delivered.user_id = recipient.user_id
) AS delivery ON true
LEFT JOIN LATERAL (
    SELECT read.at AS read_at
    FROM unnest(receipt.read_by, receipt.read_at) AS read (user_id, at)
    WHERE read.user_id = recipient.user_id
) AS reading ON true
WHERE message.tenant_id = :'tenant' AND message.chat_id = :'chat' AND message.message_id = :'message'
ORDER BY reading.read_at NULLS LAST, delivery.delivered_at NULLS LAST, recipient.user_id;
