-- 0021: replaying a webhook from any retained event (DESIGN.md, "Webhooks: the Standard
-- Webhooks form, rotation, replay and the attempt log"). A replay moves the position back
-- and counts a new replay generation: the instance delivering the webhook sees it at its
-- next lease renewal (receipts.claim_webhooks answers it) and starts again from the new
-- position, and an acknowledgement of a batch sent before the replay moves nothing
-- (receipts.acknowledge_webhook_batch compares the generation), so no replayed event is
-- skipped by an answer that was on its way.

ALTER TABLE receipts.webhooks ADD COLUMN replay_generation integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN receipts.webhooks.replay_generation IS
    'How many times the position was moved by a replay: a delivery started before the latest one starts again, and its acknowledgements move nothing.';

-- Their signatures or results change: made again by sql/functions/webhooks.sql right after.
DROP FUNCTION IF EXISTS receipts.begin_webhook_attempt(text, text, text, interval);
DROP FUNCTION IF EXISTS receipts.acknowledge_webhook_batch(text, text, text, bigint, text, boolean, interval);
DROP FUNCTION IF EXISTS receipts.claim_webhooks(text, interval, integer);
