-- 0018: a webhook's secret rotates without a failed check (DESIGN.md, "Webhooks: the
-- Standard Webhooks form, rotation, replay and the attempt log"). A rotation keeps the
-- secret it replaced for an overlap (24 h): until then every delivery's webhook-signature
-- carries a signature under each, so a receiver that knows either verifies it, and the old
-- one is dropped after (receipts.rotate_webhook_secret, sql/functions/webhooks.sql).

ALTER TABLE receipts.webhooks
    ADD COLUMN previous_secret text CHECK (length(previous_secret) BETWEEN 16 AND 128),
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD CONSTRAINT webhooks_previous_secret_expires CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
COMMENT ON COLUMN receipts.webhooks.previous_secret IS
    'The secret a rotation replaced: deliveries are signed with it too (webhook-signature) until previous_secret_expires_at.';
COMMENT ON COLUMN receipts.webhooks.previous_secret_expires_at IS
    'When previous_secret stops signing: the end of the rotation''s overlap.';

-- The attempt functions answer the previous secret too: their result type changes, so they
-- are made again by sql/functions/webhooks.sql right after.
DROP FUNCTION IF EXISTS receipts.begin_webhook_attempt(text, text, text, interval);
DROP FUNCTION IF EXISTS receipts.acknowledge_webhook_batch(text, text, text, bigint, text, boolean, interval);
