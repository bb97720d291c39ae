-- 0008: an event of a chat names its audience by version, not by a copy of the members.
--
-- Until now every event of a chat (message.created, receipt.read, receipt.delivered,
-- message.deleted, chat.deleted) stored its audience, the chat's members when it happened,
-- as an array: a read in a group of 5,000 wrote about 24 KB to the log, more than the
-- receipts it recorded. Now:
--   * receipts.chats.audience_version counts the chat's membership changes: every join and
--     leave moves it on by one (sql/functions/membership.sql);
--   * receipts.audience_periods holds, for each stretch of a user's membership, the versions
--     it covers: [from_version, until_version);
--   * an event of a chat stores only audience_version, the chat's version when it happened;
--     its audience is every user whose period covers that version, found when the event is
--     read (receipts.audience_at, sql/functions/events.sql).
-- So a member at the time of the event sees it, and one who left before does not, exactly as
-- with the stored arrays. Events of one user (unread.changed) and the tenant's own
-- (user.erased) still store their small audience as an array; the events written before this
-- migration keep theirs.
--
-- The periods outlive the chat and its member rows (no foreign key to them): the log keeps
-- the events of a deleted chat, its chat.deleted among them, until retention prunes them, and
-- their audience must still be found. Erasing a user deletes their periods (their membership
-- is forgotten: they are in no event's audience any more); retention deletes periods that
-- ended longer ago than the events it keeps (receipts.prune_events).

ALTER TABLE receipts.chats ADD COLUMN audience_version integer NOT NULL DEFAULT 1 CHECK (audience_version > 0);
COMMENT ON COLUMN receipts.chats.audience_version IS
    'Moves on by one with every join and leave: an event of the chat stores the version of when it happened, and its audience is the members of that version (receipts.audience_periods).';

CREATE TABLE receipts.audience_periods (
    tenant_id     receipts.identifier NOT NULL,
    chat_id       receipts.identifier NOT NULL,
    user_id       receipts.identifier NOT NULL,
    from_version  integer     NOT NULL CHECK (from_version > 0),
    until_version integer     CHECK (until_version > from_version),
    left_at       timestamptz CHECK ((left_at IS NULL) = (until_version IS NULL)),
    -- By user first: a leave ends the user's open period, an erasure deletes all of theirs.
    PRIMARY KEY (tenant_id, user_id, chat_id, from_version),
    FOREIGN KEY (tenant_id) REFERENCES receipts.tenants ON DELETE CASCADE
);
COMMENT ON TABLE receipts.audience_periods IS
    'Each stretch of a user''s membership in versions of the chat (receipts.chats.audience_version): the user sees the chat''s events of versions from_version <= v < until_version (until_version null: still a member). Kept after the chat is deleted, until retention.';
COMMENT ON COLUMN receipts.audience_periods.left_at IS 'When the period ended: retention deletes it once the events of its versions are gone.';
-- Who saw version v: the periods that began at or before it, in version order.
CREATE INDEX audience_periods_by_version ON receipts.audience_periods (tenant_id, chat_id, from_version)
    INCLUDE (until_version, user_id);
-- Retention finds the periods that ended long ago (most never end: a partial index).
CREATE INDEX audience_periods_ended ON receipts.audience_periods (left_at) WHERE left_at IS NOT NULL;
GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.audience_periods TO receipts_service;
CALL receipts.protect_tenant_table('receipts.audience_periods');

-- Every current member is in version 1 of their chat.
INSERT INTO receipts.audience_periods (tenant_id, chat_id, user_id, from_version)
SELECT member.tenant_id, member.chat_id, member.user_id, 1
FROM receipts.chat_members AS member
WHERE member.left_at IS NULL;

ALTER TABLE receipts.events ALTER COLUMN audience DROP NOT NULL;
ALTER TABLE receipts.events ADD COLUMN audience_version integer;
ALTER TABLE receipts.events ADD CONSTRAINT events_one_audience CHECK (audience IS NULL OR audience_version IS NULL);
COMMENT ON COLUMN receipts.events.audience IS
    'Users whose devices may see the event, stored for the events of one user (unread.changed) and of the tenant (user.erased, empty); null for the events of a chat, whose audience is audience_version''s. The tenant key sees all.';
COMMENT ON COLUMN receipts.events.audience_version IS
    'For an event of a chat: the chat''s receipts.chats.audience_version when it happened; its audience is that version''s members (receipts.audience_at). Both null: the tenant key alone sees it.';

-- The readers return the version beside the audience now, which CREATE OR REPLACE cannot
-- add: dropped here, made again by sql/functions/events.sql right after (see 0006 for what
-- an instance of the previous release meets in between).
DROP FUNCTION IF EXISTS receipts.events_since(bigint, integer);
DROP FUNCTION IF EXISTS receipts.events_after(text, bigint, bigint, integer);
DROP FUNCTION IF EXISTS receipts.retained_events_after(text, bigint, bigint, integer);
-- Nothing reads a chat's current members as an array any more.
DROP FUNCTION IF EXISTS receipts.chat_audience(text, text);
