-- 0020: the attempt log of webhooks (DESIGN.md, "Webhooks: the Standard Webhooks form,
-- rotation, replay and the attempt log"): each attempt at a batch, kept in PostgreSQL so that
-- GET /v1/webhooks/{id}/attempts and psql (sql/admin/webhook_attempts.sql) show why
-- deliveries fail. Bounded: the newest 100 a webhook (receipts.record_webhook_attempt trims
-- as it adds), and pruned with the event log (receipts.prune_events). Never the receiver's
-- answer body: the error is ours, at most 256 characters.

CREATE TABLE receipts.webhook_attempts (
    tenant_id          receipts.identifier NOT NULL,
    webhook_id         receipts.identifier NOT NULL,
    attempt_id         bigint GENERATED ALWAYS AS IDENTITY,
    webhook_message_id text        NOT NULL,
    first_event_id     text        NOT NULL,
    last_event_id      text        NOT NULL,
    events             integer     NOT NULL CHECK (events BETWEEN 1 AND 100),
    attempted_at       timestamptz NOT NULL DEFAULT now(),
    status             integer     CHECK (status BETWEEN 100 AND 599),
    duration_ms        integer     NOT NULL CHECK (duration_ms >= 0),
    error              text        CHECK (length(error) <= 256),
    PRIMARY KEY (tenant_id, webhook_id, attempt_id),
    FOREIGN KEY (tenant_id, webhook_id) REFERENCES receipts.webhooks ON DELETE CASCADE
);
COMMENT ON TABLE receipts.webhook_attempts IS
    'Each attempt to deliver a webhook batch: which events, when, the receiver''s status (null: no answer), how long, and why it failed. The newest 100 per webhook, within the event retention.';
COMMENT ON COLUMN receipts.webhook_attempts.webhook_message_id IS 'The webhook-id header of the attempt: the batch''s, the same on every attempt of it.';
COMMENT ON COLUMN receipts.webhook_attempts.status IS 'The receiver''s HTTP status; null when no answer came (a timeout, a refused connection or address).';
COMMENT ON COLUMN receipts.webhook_attempts.error IS 'Why it failed, in our words (never the receiver''s body); null when acknowledged.';
CREATE INDEX webhook_attempts_by_time ON receipts.webhook_attempts (attempted_at);
COMMENT ON INDEX receipts.webhook_attempts_by_time IS 'Pruning with the event log: the attempts older than the retention.';
GRANT SELECT, INSERT, DELETE ON receipts.webhook_attempts TO receipts_service;
CALL receipts.protect_tenant_table('receipts.webhook_attempts');
