-- 0026: the comment on receipts.webhooks pointed at a design document that is not in the
-- repository; psql shows it, so it points at docs/api.md now. (Landed migrations are not
-- edited: docs/architecture.md, "The schema".)

COMMENT ON TABLE receipts.webhooks IS
    'Where a tenant''s events are pushed (POST, signed), and how far each webhook has delivered. See docs/api.md, "Webhooks".';
