-- An import's lines (docs/api.md, "Importing history") from a PostgreSQL-backed chat app:
--     psql -XAt -f docs/export/postgresql.sql "$CHAT_APP_DATABASE_URL" > history.ndjson
-- -A -t print each row's one json column as it is, a line each (\copy ... TO would escape
-- its backslashes). Adapt the table and column names to your schema: conversations(id,
-- kind, created_at), participants(conversation_id, user_id, joined_at), messages(id,
-- conversation_id, author_id, body, sent_at, parent_id), message_reads(message_id, user_id,
-- read_at), last_read(conversation_id, user_id, message_id, read_at). ImportTests runs it.

-- Chats, with their members and when each joined.
SELECT json_build_object('type', 'chat', 'id', c.id::text, 'kind', c.kind, 'createdAt', c.created_at,
         'members', (SELECT json_agg(json_build_object('userId', p.user_id, 'joinedAt', p.joined_at) ORDER BY p.joined_at)
                     FROM participants AS p WHERE p.conversation_id = c.id))
FROM conversations AS c ORDER BY c.id;

-- Messages, each with its readers (leave readBy out if you keep only positions).
SELECT json_build_object('type', 'message', 'id', m.id::text, 'chatId', m.conversation_id::text,
         'senderId', m.author_id, 'text', m.body, 'createdAt', m.sent_at, 'threadId', m.parent_id::text,
         'readBy', coalesce((SELECT json_agg(json_build_object('userId', r.user_id, 'at', r.read_at))
                             FROM message_reads AS r WHERE r.message_id = m.id), '[]'))
FROM messages AS m ORDER BY m.conversation_id, m.sent_at;

-- Read positions: each member up to the last message they read.
SELECT json_build_object('type', 'read', 'chatId', l.conversation_id::text, 'userId', l.user_id,
         'upTo', l.message_id::text, 'at', l.read_at)
FROM last_read AS l;
