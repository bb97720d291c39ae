-- 0019: a receiver that answers 410 Gone disables its webhook (DESIGN.md, "Webhooks: the
-- Standard Webhooks form, rotation, replay and the attempt log"): no instance claims it
-- (receipts.claim_webhooks) until a PUT enables it again at its position
-- (receipts.put_webhook). GET shows it (receipts.webhooks_of answers `disabled`).

ALTER TABLE receipts.webhooks ADD COLUMN disabled_at timestamptz;
COMMENT ON COLUMN receipts.webhooks.disabled_at IS
    'When the receiver answered 410 Gone: the webhook is not delivered until a PUT enables it (null: enabled).';

-- Its result gains `disabled`: made again by sql/functions/webhooks.sql right after.
DROP FUNCTION IF EXISTS receipts.webhooks_of(text, text);
