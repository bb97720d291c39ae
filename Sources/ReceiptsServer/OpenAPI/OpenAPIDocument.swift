/// The OpenAPI 3.1 description of the HTTP API, served at `GET /openapi.yaml`.
enum OpenAPIDocument {
    static let yaml = #"""
    openapi: 3.1.0
    info:
      title: Receipts
      version: 1.0.0
      description: |
        Receipts is a multi-tenant service that tells chat apps whether their messages
        were delivered and read. A tenant's chat backend calls this HTTP API with its
        tenant key; end-user devices may call it with a short-lived user token that acts
        only as its own user. Reads are idempotent, never go backwards (read implies
        delivered), never count the sender themself, and never leak across chats or
        tenants.

        JSON bodies use camelCase. Timestamps are RFC 3339 UTC strings with milliseconds.
        Ids (tenant, chat, user, message) are 1–128 characters of `[A-Za-z0-9._:@-]`.
        Every 4xx/5xx body is `{"error": {"code": "<machine_code>", "message": "<human text>"}}`,
        and a bad request never changes any state. Any request body over 1 MiB is
        answered 413, whatever it contains, and a JSON body with a duplicated member is 400.
        Path parameters may be percent-encoded (`a%40x.org` is `a@x.org`).

        Limits: a connection must send a complete request head within 10 s and is closed
        after 60 s idle between requests; a malformed request is answered 400 and closed.
        When PostgreSQL is unreachable or too slow, any request answers 503 `unavailable`
        within `RECEIPTS_DATABASE_TIMEOUT_SECONDS` (default 5), never 500 and never a hang;
        a credential that cannot be checked then is 503 too, never 401.
    servers:
      - url: http://127.0.0.1:8080
    tags:
      - name: admin
        description: Tenant administration (admin token).
      - name: tokens
        description: Minting user tokens (tenant key).
      - name: chats
        description: Chats and their members.
      - name: messages
        description: Sending and listing messages, with their receipts.
      - name: receipts
        description: Marking messages delivered or read, and chats unread.
      - name: users
        description: Per-user unread counts and settings.
      - name: operations
        description: Health, readiness, metrics and this document.

    paths:
      /admin/v1/tenants:
        post:
          tags: [admin]
          operationId: createTenant
          summary: Create a tenant
          description: |
            Creates a tenant and returns its API key. The key is stored hashed and is
            shown only in this response. The whole `/admin/*` API answers 404 while
            `RECEIPTS_ADMIN_TOKEN` is unset (admin API disabled).
          security:
            - adminToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/CreateTenantRequest'
          responses:
            '201':
              description: The tenant was created.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Tenant'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '404':
              description: The admin API is disabled because `RECEIPTS_ADMIN_TOKEN` is unset.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Error'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/tokens:
        post:
          tags: [tokens]
          operationId: createToken
          summary: Mint a user token
          description: |
            Mints a short-lived user token (a JWT) for one user of the calling tenant. An
            end-user device presents it as `Authorization: Bearer <token>` and then acts
            only as that user. Needs the tenant key.
          security:
            - tenantKey: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/TokenRequest'
          responses:
            '201':
              description: The token was minted.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Token'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        put:
          tags: [chats]
          operationId: putChat
          summary: Create a chat (idempotent)
          description: |
            Creates the chat with the given kind and members. A direct chat has exactly 2
            members. Repeating the request when the kind and the current members match
            answers 200 with the chat; any other difference answers 409. Needs the tenant
            key.
          security:
            - tenantKey: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/PutChatRequest'
          responses:
            '201':
              description: The chat was created.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Chat'
            '200':
              description: The chat already exists with the same kind and current members.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Chat'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '409':
              $ref: '#/components/responses/Conflict'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'
        get:
          tags: [chats]
          operationId: getChat
          summary: Get a chat
          description: |
            The chat with its current members. A user token must belong to a member
            (another chat of its tenant is 403); another tenant's chat is 404.
          security:
            - tenantKey: []
            - userToken: []
          responses:
            '200':
              description: The chat.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Chat'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/members:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        post:
          tags: [chats]
          operationId: addMember
          summary: Add a member (join)
          description: |
            Adds the user to a group chat. Idempotent: adding a current member answers 200
            with the unchanged chat. A direct chat answers 409. A user who rejoins is a
            recipient of the messages sent during any of their membership periods, and of
            no others. Needs the tenant key.
          security:
            - tenantKey: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/JoinRequest'
          responses:
            '200':
              description: The chat with its current members.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Chat'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '409':
              $ref: '#/components/responses/Conflict'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/members/{userId}:
        parameters:
          - $ref: '#/components/parameters/ChatId'
          - $ref: '#/components/parameters/UserId'
        delete:
          tags: [chats]
          operationId: removeMember
          summary: Remove a member (leave)
          description: |
            Removes the user from the chat. Idempotent: removing a user who is not a
            member answers 200 with the unchanged chat. A member who leaves is no longer
            waited for as a recipient; a read they made before leaving still counts. A
            user token may only remove its own user (another user is 403).
          security:
            - tenantKey: []
            - userToken: []
          responses:
            '200':
              description: The chat with its current members.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Chat'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/messages:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        post:
          tags: [messages]
          operationId: sendMessage
          summary: Send a message
          description: |
            Stores a message from `senderId`, who must be a current member of the chat
            (otherwise 403). Without `id` the service assigns one. Sending the same `id`
            and body again answers 200 with the same message; the same `id` with another
            body answers 409. `text` is at most 64 KiB (400 beyond). A user token may only
            send as its own user.
          security:
            - tenantKey: []
            - userToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/SendMessageRequest'
          responses:
            '201':
              description: The message was created.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Message'
            '200':
              description: A message with this `id` and the same body already exists; it is returned unchanged.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Message'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '409':
              $ref: '#/components/responses/Conflict'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'
        get:
          tags: [messages]
          operationId: listMessages
          summary: List messages
          description: |
            Messages of the chat, oldest first. Without `before`, the newest `limit`
            messages; with `before`, the `limit` messages immediately preceding that
            message (exclusive). Each message carries a `receipt` when the viewer is its
            sender. An unknown `labels` or `tz` is 400.
          security:
            - tenantKey: []
            - userToken: []
          parameters:
            - $ref: '#/components/parameters/Viewer'
            - $ref: '#/components/parameters/Before'
            - $ref: '#/components/parameters/Limit'
            - $ref: '#/components/parameters/Labels'
            - $ref: '#/components/parameters/Tz'
          responses:
            '200':
              description: The messages, oldest first.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/MessageList'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/messages/{messageId}:
        parameters:
          - $ref: '#/components/parameters/ChatId'
          - $ref: '#/components/parameters/MessageId'
        get:
          tags: [messages]
          operationId: getMessage
          summary: Get one message
          description: |
            One message. When the viewer is its sender it carries `receipt` and
            `recipients` (one entry per recipient).
          security:
            - tenantKey: []
            - userToken: []
          parameters:
            - $ref: '#/components/parameters/Viewer'
          responses:
            '200':
              description: The message.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Message'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/read:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        post:
          tags: [receipts]
          operationId: markRead
          summary: Mark messages read
          description: |
            Marks messages read by `userId`: the listed `messageIds`, or `upTo` and every
            earlier message, or (with neither) everything. Reading implies delivery and
            clears the chat's marked-unread state. Marking is idempotent; unknown ids, the
            user's own messages and messages sent before they joined are skipped and count
            0 in `marked`. `marked` counts what changed, hidden reads included. More than
            1000 ids, an empty `messageIds`, or both `messageIds` and `upTo` is 400; an
            unknown `upTo` is 404. A user token may only mark as its own user, in chats it
            is a member of.
          security:
            - tenantKey: []
            - userToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/MarkRequest'
          responses:
            '200':
              description: The messages were marked read.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/MarkReadResponse'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/delivered:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        post:
          tags: [receipts]
          operationId: markDelivered
          summary: Mark messages delivered
          description: |
            Marks messages delivered to `userId`, with the same request shapes and rules as
            `POST /v1/chats/{chatId}/read`: the listed `messageIds`, or `upTo` and every
            earlier message, or (with neither) everything. More than 1000 ids, an empty
            `messageIds`, or both `messageIds` and `upTo` is 400; an unknown `upTo` is 404.
          security:
            - tenantKey: []
            - userToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/MarkRequest'
          responses:
            '200':
              description: The messages were marked delivered.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/MarkDeliveredResponse'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/chats/{chatId}/unread:
        parameters:
          - $ref: '#/components/parameters/ChatId'
        post:
          tags: [receipts]
          operationId: markUnread
          summary: Mark a chat unread
          description: |
            Marks the chat unread for `userId` only; nothing changes for the senders. While
            marked, the chat's unread count for that user is at least 1; reading clears the
            mark.
          security:
            - tenantKey: []
            - userToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/MarkUnreadRequest'
          responses:
            '200':
              description: The chat is marked unread for the user.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/UnreadCountResponse'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '404':
              $ref: '#/components/responses/NotFound'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/users/{userId}/unread:
        parameters:
          - $ref: '#/components/parameters/UserId'
        get:
          tags: [users]
          operationId: getUnread
          summary: Unread counts of a user
          description: |
            The user's chats whose `unreadCount` is above 0 or that are marked unread; a
            chat not listed has 0. `total` is the sum of the listed counts. A user token
            may only ask for its own user.
          security:
            - tenantKey: []
            - userToken: []
          responses:
            '200':
              description: The user's unread counts.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/UnreadList'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/users/{userId}/settings:
        parameters:
          - $ref: '#/components/parameters/UserId'
        put:
          tags: [users]
          operationId: putSettings
          summary: Set a user's settings
          description: |
            With `readReceipts: false`, the user's unread counts are cleared as usual but
            their reads are never shown to anyone: not in `readBy`, not in counts, not in
            `readAt` times, not in events. Whether a read is shown is fixed when it is
            made: turning receipts back on reveals nothing, and reading again publishes
            nothing. Their deliveries stay visible. A user token may only change its own
            user's settings.
          security:
            - tenantKey: []
            - userToken: []
          requestBody:
            required: true
            content:
              application/json:
                schema:
                  $ref: '#/components/schemas/SettingsRequest'
          responses:
            '200':
              description: The user's settings.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Settings'
            '400':
              $ref: '#/components/responses/BadRequest'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '403':
              $ref: '#/components/responses/Forbidden'
            '413':
              $ref: '#/components/responses/PayloadTooLarge'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/stream:
        get:
          tags: [events]
          operationId: streamEvents
          summary: Live events over WebSocket
          description: |
            Upgrades to a WebSocket that carries one event (an `Event` JSON object) per text
            frame: `message.created` and `receipt.*` of the chats the user is a member of (all of
            the tenant's with the tenant key), and the user's own `unread.changed`. A stream
            without `after` receives every visible event committed after the handshake
            response. `after` resumes after that id, replaying every later event exactly once,
            in order; an unknown or expired id gets one `resync.required` event carrying the
            current id, then the stream continues live. The client may send
            `{"type":"delivered","chatId":"…","messageIds":["…"]}` to acknowledge delivery as
            its user (ignored for chats it is not a member of); when it cannot be recorded (the
            database is unavailable) the stream sends
            `{"type":"delivered.failed","chatId","messageIds","error":{"code","message"}}` (no
            `id`: not an event of the log) and the client may send it again. A client frame over
            64 KiB closes the socket (1009); a message may span frames up to 1 MiB.
            The stream closes with a reason so that clients resume: 1008 when the client fell
            too far behind or its credential stopped being valid (a user token at its expiry,
            an API key that was replaced), 1001 when the server shuts down. A refused upgrade
            answers with the error JSON (401, 429, 503) before switching protocols.
          security:
            - tenantKey: []
            - userToken: []
          parameters:
            - name: token
              in: query
              description: |
                A user token, for clients that cannot set headers (browsers). API keys are
                refused here (401): they belong in the `Authorization` header, never in a URL.
              schema:
                type: string
            - name: after
              in: query
              description: Resume after this event id.
              schema:
                type: string
          responses:
            '101':
              description: Switching to the WebSocket protocol; frames carry `Event` objects.
            '401':
              $ref: '#/components/responses/Unauthorized'
            '429':
              $ref: '#/components/responses/RateLimited'
            '503':
              $ref: '#/components/responses/Unavailable'

      /v1/events:
        get:
          tags: [events]
          operationId: eventSource
          summary: Live events as Server-Sent Events
          description: |
            The same events as `/v1/stream`, as `text/event-stream`: each event is an `id:` line
            (the event's id) and a `data:` line (the `Event` JSON). `Last-Event-ID` (or `after`)
            resumes; a comment line every 15 seconds keeps the connection alive. The stream
            ends after a `: closed: <reason>` comment when the server shuts down, the client
            fell too far behind, or the credential stopped being valid; EventSource then
            reconnects with `Last-Event-ID`.
          security:
            - tenantKey: []
            - userToken: []
          parameters:
            - name: Last-Event-ID
              in: header
              description: Resume after this event id.
              schema:
                type: string
            - name: after
              in: query
              description: Resume after this event id (when the header cannot be set).
              schema:
                type: string
            - name: token
              in: query
              description: |
                A user token, for EventSource clients that cannot set headers. API keys are
                refused here (401): they belong in the `Authorization` header, never in a URL.
              schema:
                type: string
          responses:
            '200':
              description: An endless event stream.
              content:
                text/event-stream:
                  schema:
                    type: string
                    description: '`id: <id>` and `data: <Event JSON>` lines, blank-line separated.'
            '401':
              $ref: '#/components/responses/Unauthorized'
            '429':
              $ref: '#/components/responses/RateLimited'
            '503':
              $ref: '#/components/responses/Unavailable'

      /healthz:
        get:
          tags: [operations]
          operationId: healthz
          summary: Liveness
          security: []
          responses:
            '200':
              description: The process is alive.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Health'

      /readyz:
        get:
          tags: [operations]
          operationId: readyz
          summary: Readiness
          description: Ready when the database answers and the notification listener runs.
          security: []
          responses:
            '200':
              description: The service is ready.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Health'
            '503':
              description: The database or the listener is unavailable.
              content:
                application/json:
                  schema:
                    $ref: '#/components/schemas/Error'

      /metrics:
        get:
          tags: [operations]
          operationId: metrics
          summary: Prometheus metrics
          security: []
          responses:
            '200':
              description: Metrics in the Prometheus text exposition format.
              content:
                text/plain:
                  schema:
                    type: string

      /openapi.yaml:
        get:
          tags: [operations]
          operationId: openapi
          summary: This document
          security: []
          responses:
            '200':
              description: The OpenAPI 3.1 description of the HTTP API.
              content:
                application/yaml:
                  schema:
                    type: string

    components:
      securitySchemes:
        adminToken:
          type: http
          scheme: bearer
          description: |
            The operator's admin token, `Authorization: Bearer <RECEIPTS_ADMIN_TOKEN>`,
            for `/admin/v1/*`. While `RECEIPTS_ADMIN_TOKEN` is unset the admin API is
            disabled and answers 404.
        tenantKey:
          type: http
          scheme: bearer
          description: |
            A tenant's API key, `Authorization: Bearer <apiKey>` (from
            `POST /admin/v1/tenants`), used by the tenant's backend. It may act for any
            user of that tenant; the user is named in the request. Keys are stored hashed.
            A wrong or missing credential gets 401; another tenant's chat looks exactly
            like a chat that does not exist (404). A tenant key naming a user who is not a
            member of the chat gets 403.
        userToken:
          type: http
          scheme: bearer
          bearerFormat: JWT
          description: |
            A short-lived user token, `Authorization: Bearer <token>`, a JWT minted by
            `POST /v1/tokens`, used by an end-user device. It acts only as its own user: a
            request naming another user gets 403, and so does another chat of its tenant
            that the user is not a member of. Creating chats, adding members and minting
            tokens need the tenant key.

      parameters:
        ChatId:
          name: chatId
          in: path
          required: true
          description: The chat's id.
          schema:
            $ref: '#/components/schemas/Id'
        UserId:
          name: userId
          in: path
          required: true
          description: The user's id.
          schema:
            $ref: '#/components/schemas/Id'
        MessageId:
          name: messageId
          in: path
          required: true
          description: The message's id.
          schema:
            $ref: '#/components/schemas/Id'
        Viewer:
          name: viewer
          in: query
          required: false
          description: |
            The user whose view is asked for. With a tenant key it is optional: without it
            no `receipt` is computed. With a user token it is that user; naming anyone
            else is 403. A tenant key naming a user who is not a member is 403.
          schema:
            $ref: '#/components/schemas/Id'
        Before:
          name: before
          in: query
          required: false
          description: A message id; only messages before it are listed (exclusive).
          schema:
            $ref: '#/components/schemas/Id'
        Limit:
          name: limit
          in: query
          required: false
          description: How many messages to list at most.
          schema:
            type: integer
            minimum: 1
            maximum: 1000
            default: 50
        Labels:
          name: labels
          in: query
          required: false
          description: |
            The style of `receipt.label` (an unknown style is 400):

            - `counts` (default): no reads: `Delivered`; direct chat read: `Read`; group
              chat: `Read by X/Y`, and when all have read: `Read by all`.
            - `ticks`: `Sent` / `Delivered` / `Read` by `state` (in a group, `Read` only
              when all recipients have read).
            - `imessage`: only on the viewer's most recent message, null elsewhere; not
              delivered to all recipients: null; delivered, no reads: `Delivered`; direct
              chat read: `Read at 5:42 PM` (12-hour clock, no leading zero, time in `tz`,
              default UTC); group chat: `Read by some users` / `Read by all users`.

            With no recipients (Y = 0) the labels are those of "no reads": `Delivered`
            (counts), `Sent` (ticks), null (imessage).
          schema:
            type: string
            enum: [counts, ticks, imessage]
            default: counts
        Tz:
          name: tz
          in: query
          required: false
          description: |
            An IANA time zone name (e.g. `Europe/Paris`) for times in labels (the
            `imessage` style's `Read at 5:42 PM`). An unknown name is 400.
          schema:
            type: string
            default: UTC
            examples: [UTC, America/New_York]

      responses:
        BadRequest:
          description: |
            Invalid request (`invalid_request`): bad JSON, a bad id, too many ids, wrong
            types, or a value out of range. Nothing was changed.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        Unauthorized:
          description: A wrong or missing credential (`unauthorized`).
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        Forbidden:
          description: |
            The credential may not do this (`forbidden`): a user token naming another user
            or a chat it is not a member of, a user token where the tenant key is needed,
            or a named user who is not a member of the chat.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        NotFound:
          description: |
            Not found (`not_found`). Another tenant's chat looks exactly like a chat that
            does not exist.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        Conflict:
          description: The request conflicts with the current state (`conflict`).
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        PayloadTooLarge:
          description: The request body is over 1 MiB (`payload_too_large`), whatever it contains.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        RateLimited:
          description: |
            Too many streams open (`rate_limited`): the user already has
            `RECEIPTS_MAX_STREAMS_PER_USER` (default 20), or the tenant
            `RECEIPTS_MAX_STREAMS_PER_TENANT` (default 10000), on this instance. Answered before
            the upgrade or the event-stream headers.
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'
        Unavailable:
          description: |
            PostgreSQL is unreachable or did not answer within `RECEIPTS_DATABASE_TIMEOUT_SECONDS`
            (`unavailable`). Nothing is known to have changed; retry (idempotent requests are
            safe to repeat).
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Error'

      schemas:
        Event:
          type: object
          description: |
            One change, as streams deliver it. `id` is opaque and URL-safe (at most 64 characters
            of [A-Za-z0-9._:-]), in stream order: store the last one and send it back to resume,
            never compare ids. `unread.changed` also carries `unreadCount` and `markedUnread`.
          required: [id, type]
          properties:
            id:
              type: string
            type:
              type: string
              enum: [message.created, receipt.delivered, receipt.read, unread.changed, resync.required]
            chatId:
              $ref: '#/components/schemas/Id'
            userId:
              $ref: '#/components/schemas/Id'
            messageIds:
              type: array
              items:
                $ref: '#/components/schemas/Id'
            at:
              $ref: '#/components/schemas/Timestamp'
            unreadCount:
              type: integer
            markedUnread:
              type: boolean
        Error:
          type: object
          description: The body of every 4xx/5xx answer.
          required: [error]
          properties:
            error:
              type: object
              required: [code, message]
              properties:
                code:
                  type: string
                  description: A machine-readable code.
                  enum:
                    - invalid_request
                    - unauthorized
                    - forbidden
                    - not_found
                    - method_not_allowed
                    - conflict
                    - payload_too_large
                    - rate_limited
                    - unavailable
                    - internal_error
                message:
                  type: string
                  description: A human-readable explanation.
          example:
            error:
              code: not_found
              message: chat not found

        Id:
          type: string
          description: A tenant, chat, user or message id, 1–128 characters of `[A-Za-z0-9._:@-]`.
          pattern: '^[A-Za-z0-9._:@-]{1,128}$'
          minLength: 1
          maxLength: 128

        Timestamp:
          type: string
          format: date-time
          description: An RFC 3339 UTC time with milliseconds.
          examples: ['2024-05-01T17:42:07.123Z']

        CreateTenantRequest:
          type: object
          required: [name]
          properties:
            name:
              type: string
              description: The tenant's display name.

        Tenant:
          type: object
          required: [id, name, apiKey]
          properties:
            id:
              $ref: '#/components/schemas/Id'
            name:
              type: string
            apiKey:
              type: string
              description: The tenant key; stored hashed and shown only once.

        TokenRequest:
          type: object
          required: [userId]
          properties:
            userId:
              $ref: '#/components/schemas/Id'
            ttlSeconds:
              type: integer
              minimum: 1
              maximum: 86400
              default: 3600
              description: The token's lifetime in seconds.

        Token:
          type: object
          required: [token, expiresAt]
          properties:
            token:
              type: string
              description: 'A JWT to use as `Authorization: Bearer <token>`.'
            expiresAt:
              $ref: '#/components/schemas/Timestamp'

        PutChatRequest:
          type: object
          required: [kind, members]
          properties:
            kind:
              type: string
              enum: [direct, group]
              description: A direct chat has exactly 2 members.
            members:
              type: array
              description: The user ids of the chat's members.
              items:
                $ref: '#/components/schemas/Id'

        ChatMember:
          type: object
          required: [userId, joinedAt]
          properties:
            userId:
              $ref: '#/components/schemas/Id'
            joinedAt:
              $ref: '#/components/schemas/Timestamp'

        Chat:
          type: object
          required: [id, kind, members, createdAt]
          properties:
            id:
              $ref: '#/components/schemas/Id'
            kind:
              type: string
              enum: [direct, group]
            members:
              type: array
              description: The current members.
              items:
                $ref: '#/components/schemas/ChatMember'
            createdAt:
              $ref: '#/components/schemas/Timestamp'

        JoinRequest:
          type: object
          required: [userId]
          properties:
            userId:
              $ref: '#/components/schemas/Id'

        SendMessageRequest:
          type: object
          required: [senderId, text]
          properties:
            id:
              $ref: '#/components/schemas/Id'
            senderId:
              $ref: '#/components/schemas/Id'
            text:
              type: string
              maxLength: 65536
              description: At most 64 KiB; longer is 400.

        Message:
          type: object
          required: [id, chatId, seq, senderId, text, createdAt, readBy, deliveredTo]
          properties:
            id:
              $ref: '#/components/schemas/Id'
            chatId:
              $ref: '#/components/schemas/Id'
            seq:
              type: integer
              format: int64
              description: The message's position in the chat (monotonic per chat).
            senderId:
              $ref: '#/components/schemas/Id'
            text:
              type: string
            createdAt:
              $ref: '#/components/schemas/Timestamp'
            readBy:
              type: array
              description: Users whose read is shown (hidden reads are not listed).
              items:
                $ref: '#/components/schemas/Id'
            deliveredTo:
              type: array
              description: Users the message was delivered to (reading implies delivery).
              items:
                $ref: '#/components/schemas/Id'
            receipt:
              $ref: '#/components/schemas/Receipt'
            recipients:
              type: array
              description: |
                Single-message endpoint, sender only: one entry per recipient (Y).
              items:
                $ref: '#/components/schemas/RecipientStatus'

        Receipt:
          type: object
          description: |
            The sender's view of a message's receipts; present when the viewer is the
            sender.

            Recipients (Y): the chat's members when the message was sent, other than the
            sender, who are still members or who read it before leaving. A member who
            leaves is no longer waited for; a read they made before leaving still counts.
            A user who rejoins is a recipient of the messages sent during any of their
            membership periods, and of no others. `delivered` (D) and `read` (X) count
            among Y. Reading implies delivery; marking is idempotent; the sender's own
            messages are never marked by the sender. Reads of users with
            `readReceipts: false` are never shown (not in counts, not in `readAt`).

            `state`: `sent` when Y is 0; otherwise `read` when every recipient has read;
            else `delivered` when every recipient has it; else `sent`.

            `label`, by the style chosen with the `labels` query parameter (default
            `counts`):

            - `counts`: no reads: `Delivered`; direct chat read: `Read`; group chat:
              `Read by X/Y`, and when all have read: `Read by all`.
            - `ticks`: `Sent` / `Delivered` / `Read` by `state` (in a group, `Read` only
              when all recipients have read).
            - `imessage`: only on the viewer's most recent message, null elsewhere; not
              delivered to all recipients: null; delivered, no reads: `Delivered`; direct
              chat read: `Read at 5:42 PM` (12-hour clock, no leading zero, time in `tz`,
              default UTC); group chat: `Read by some users` / `Read by all users`.

            With Y = 0 the labels are those of "no reads": `Delivered` (counts), `Sent`
            (ticks), null (imessage).
          required: [state, recipients, delivered, read, readAt, label]
          properties:
            state:
              type: string
              enum: [sent, delivered, read]
            recipients:
              type: integer
              minimum: 0
              description: Y, the number of recipients.
            delivered:
              type: integer
              minimum: 0
              description: D, how many recipients the message was delivered to.
            read:
              type: integer
              minimum: 0
              description: X, how many recipients have (visibly) read the message.
            readAt:
              type: [string, 'null']
              format: date-time
              description: The time the message became read by all recipients, or null.
            label:
              type: [string, 'null']
              description: The label in the chosen style, or null.

        RecipientStatus:
          type: object
          required: [userId, deliveredAt, readAt]
          properties:
            userId:
              $ref: '#/components/schemas/Id'
            deliveredAt:
              type: [string, 'null']
              format: date-time
              description: When the message was delivered to this recipient, or null.
            readAt:
              type: [string, 'null']
              format: date-time
              description: When this recipient read the message, or null (also for a read that is hidden).

        MessageList:
          type: object
          required: [messages]
          properties:
            messages:
              type: array
              description: Oldest first.
              items:
                $ref: '#/components/schemas/Message'

        MarkRequest:
          type: object
          description: |
            `{"userId","messageIds"}` marks the listed messages; `{"userId","upTo"}` marks
            that message and every earlier one; `{"userId"}` alone marks everything. A body
            with both `messageIds` and `upTo` is 400.
          required: [userId]
          properties:
            userId:
              $ref: '#/components/schemas/Id'
            messageIds:
              type: array
              minItems: 1
              maxItems: 1000
              description: 1–1000 message ids; more or none is 400. Unknown ids are skipped.
              items:
                $ref: '#/components/schemas/Id'
            upTo:
              $ref: '#/components/schemas/Id'
          not:
            required: [messageIds, upTo]

        MarkReadResponse:
          type: object
          required: [marked, unreadCount]
          properties:
            marked:
              type: integer
              minimum: 0
              description: How many messages changed, hidden reads included.
            unreadCount:
              type: integer
              minimum: 0
              description: The chat's unread count for the user afterwards.

        MarkDeliveredResponse:
          type: object
          required: [marked]
          properties:
            marked:
              type: integer
              minimum: 0
              description: How many messages changed.

        MarkUnreadRequest:
          type: object
          required: [userId]
          properties:
            userId:
              $ref: '#/components/schemas/Id'

        UnreadCountResponse:
          type: object
          required: [unreadCount]
          properties:
            unreadCount:
              type: integer
              minimum: 0
              description: The chat's unread count for the user (at least 1 while marked unread).

        UnreadChat:
          type: object
          required: [chatId, unreadCount, badge, markedUnread]
          properties:
            chatId:
              $ref: '#/components/schemas/Id'
            unreadCount:
              type: integer
              minimum: 0
              description: |
                Messages from others, sent while the user was a member, not read by them;
                at least 1 while the chat is marked unread.
            badge:
              type: string
              description: The count as text, `99+` above 99, empty for 0.
            markedUnread:
              type: boolean

        UnreadList:
          type: object
          required: [total, badge, chats]
          properties:
            total:
              type: integer
              minimum: 0
              description: The sum of the listed chats' unread counts.
            badge:
              type: string
              description: The total as text, `99+` above 99, empty for 0.
            chats:
              type: array
              description: The chats whose unread count is above 0 or that are marked unread.
              items:
                $ref: '#/components/schemas/UnreadChat'

        SettingsRequest:
          type: object
          required: [readReceipts]
          properties:
            readReceipts:
              type: boolean
              description: Whether the user's reads are shown to others.

        Settings:
          type: object
          required: [userId, readReceipts]
          properties:
            userId:
              $ref: '#/components/schemas/Id'
            readReceipts:
              type: boolean

        Health:
          type: object
          required: [status]
          properties:
            status:
              type: string
              examples: [ok, ready]
    """#
}
