-- 0029: the foreign keys an import's group writes rows under may be deferred, so that
-- receipts.import_group checks them once its rows are in, with generic plans.
--
-- Why: a foreign key's check is a query PostgreSQL plans for the values of its first rows.
-- For a tenant the statistics do not know yet (one that has just started to import its
-- history), every index of the referenced table that starts with tenant_id looks as cheap
-- as the key, and PostgreSQL took receipts.messages_by_sender (tenant, sender, chat, seq)
-- for the check of (tenant, chat, seq): each check read all of the tenant's messages, and a
-- group of 60,000 messages spent 220 s in its checks instead of a fraction of one. The
-- generic plan of the same check knows nothing of the tenant, and takes the key.
-- DEFERRABLE INITIALLY IMMEDIATE: for every other writer nothing changes (each statement is
-- checked at its end, as before); only a transaction that defers them (SET CONSTRAINTS)
-- checks them later.

ALTER TABLE receipts.receipt_chunks ALTER CONSTRAINT receipt_chunks_tenant_id_chat_id_seq_fkey DEFERRABLE INITIALLY IMMEDIATE;
ALTER TABLE receipts.mentions ALTER CONSTRAINT mentions_tenant_id_chat_id_seq_fkey DEFERRABLE INITIALLY IMMEDIATE;
ALTER TABLE receipts.threads ALTER CONSTRAINT threads_tenant_id_chat_id_root_seq_fkey DEFERRABLE INITIALLY IMMEDIATE;
ALTER TABLE receipts.chat_members ALTER CONSTRAINT chat_members_tenant_id_chat_id_fkey DEFERRABLE INITIALLY IMMEDIATE;
ALTER TABLE receipts.membership_periods ALTER CONSTRAINT membership_periods_tenant_id_chat_id_user_id_fkey DEFERRABLE INITIALLY IMMEDIATE;
