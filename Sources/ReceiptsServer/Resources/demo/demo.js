// Receipts live demo: two web clients (Alice and Bob) on one page, each with its own user
// token and its own event stream, using only the public API (docs/api.md). The tokens come
// from POST /demo/session, the demo's one route of its own; the tenant key stays on the
// server. See docs/web-clients.md.
"use strict";

const LABEL_STYLES = ["ticks", "counts", "imessage"];
const TIME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const TICKS = { Sent: "✓", Delivered: "✓✓", Read: "✓✓" };

/** The page's state: the demo session and one pane per user. */
const demo = { session: null, panes: [], transport: "websocket", refreshTimer: null };

function $(root, selector) {
  return root.querySelector(selector);
}

function setStatus(text, state) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.dataset.status = state;
}

/** Asks the server for the demo users' tokens (and the chats, created when missing). */
async function fetchSession() {
  const response = await fetch("/demo/session", { method: "POST" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : `HTTP ${response.status}`);
  return body;
}

function chatTitle(chat, user) {
  if (chat.kind === "direct") {
    const other = chat.members.find((member) => member !== user);
    return `Direct with ${capitalized(other)}`;
  }
  return `Group (${chat.members.map(capitalized).join(", ")})`;
}

function capitalized(name) {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/** One user's web client: its chats, its unread badges, its stream. */
class Pane {
  constructor(user, token, chats) {
    this.user = user;
    this.token = token;
    this.chats = chats;
    this.selectedChat = chats[0].chatId;
    this.lastEventId = null;
    this.stream = null;
    this.reconnectDelay = 250;
    this.reconnectTimer = null;
    this.refreshing = new Map(); // chatId -> {running, again}
    // What the composer does next: send (null), reply in a thread, or edit a message.
    this.mode = null; // {kind: "reply" | "edit", messageId, text}
    this.element = this.render();
  }

  render() {
    const element = document.getElementById("pane-template").content.firstElementChild.cloneNode(true);
    element.dataset.user = this.user;
    $(element, ".user-name").textContent = capitalized(this.user);
    const tabs = $(element, ".chat-tabs");
    for (const chat of this.chats) {
      const tab = document.createElement("button");
      tab.type = "button";
      tab.className = "chat-tab";
      tab.dataset.chat = chat.chatId;
      tab.innerHTML = '<span class="chat-title"></span> <span class="badge"></span><span class="badge mention"></span>';
      $(tab, ".chat-title").textContent = chatTitle(chat, this.user);
      tab.addEventListener("click", () => this.open(chat.chatId));
      tabs.appendChild(tab);
    }
    $(element, ".mark-read").addEventListener("click", () => this.markRead(this.selectedChat));
    $(element, ".composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = event.target.elements.text;
      const text = input.value.trim();
      if (text) {
        input.value = "";
        if (this.mode?.kind === "edit") this.edit(this.mode.messageId, text);
        else this.send(text, this.mode?.kind === "reply" ? this.mode.messageId : null);
        this.setMode(null);
      }
    });
    $(element, ".cancel-mode").addEventListener("click", () => this.setMode(null));
    this.element = element;
    this.showSelection();
    return element;
  }

  /** The public API, as this user. */
  async api(method, path, body) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    const json = text ? JSON.parse(text) : null;
    if (!response.ok) {
      if (response.status === 401) scheduleSessionRefresh(0);
      throw new Error(json && json.error ? `${json.error.code}: ${json.error.message}` : `HTTP ${response.status}`);
    }
    return json;
  }

  /** Shows a chat, and reads it: opening a chat is reading it. */
  async open(chatId) {
    this.selectedChat = chatId;
    this.showSelection();
    $(this.element, ".messages").replaceChildren();
    await this.refreshMessages(chatId);
    await this.markRead(chatId);
  }

  showSelection() {
    for (const tab of this.element.querySelectorAll(".chat-tab")) {
      tab.classList.toggle("selected", tab.dataset.chat === this.selectedChat);
    }
  }

  /** Sends `text`, in the thread of `threadId` when given; `@name` mentions a member, `@all` everyone. */
  async send(text, threadId) {
    const chat = this.chats.find((candidate) => candidate.chatId === this.selectedChat);
    const named = [...text.matchAll(/@([A-Za-z0-9._:-]+)/g)].map((match) => match[1].toLowerCase());
    const body = { senderId: this.user, text };
    const mentions = named.filter((name) => chat.members.includes(name) && name !== this.user);
    if (mentions.length > 0) body.mentions = mentions;
    if (named.includes("all")) body.mentionsAll = true;
    if (threadId) body.threadId = threadId;
    try {
      await this.api("POST", `/v1/chats/${encodeURIComponent(this.selectedChat)}/messages`, body);
    } catch (error) {
      this.log(`send failed: ${error.message}`);
    }
  }

  /** Changes the text of one of this user's messages: its receipts stay. */
  async edit(messageId, text) {
    try {
      await this.api("PATCH", `/v1/chats/${encodeURIComponent(this.selectedChat)}/messages/${encodeURIComponent(messageId)}`, { text });
    } catch (error) {
      this.log(`edit failed: ${error.message}`);
    }
  }

  /** The composer's next action: a reply in a thread, an edit, or (null) a plain send. */
  setMode(mode) {
    this.mode = mode;
    const bar = $(this.element, ".composer-mode");
    bar.hidden = mode === null;
    const input = $(this.element, ".composer").elements.text;
    if (mode === null) {
      input.placeholder = "Message";
      return;
    }
    $(bar, ".mode-text").textContent = mode.kind === "edit" ? "Editing your message" : `Replying in the thread of “${mode.text}”`;
    input.placeholder = mode.kind === "edit" ? "New text" : "Reply";
    if (mode.kind === "edit") input.value = mode.text;
    input.focus();
  }

  async markRead(chatId) {
    try {
      await this.api("POST", `/v1/chats/${encodeURIComponent(chatId)}/read`, { userId: this.user });
    } catch (error) {
      this.log(`read failed: ${error.message}`);
    }
  }

  async markDelivered(chatId, messageIds) {
    try {
      await this.api("POST", `/v1/chats/${encodeURIComponent(chatId)}/delivered`, { userId: this.user, messageIds });
    } catch (error) {
      this.log(`delivered failed: ${error.message}`);
    }
  }

  /** The open chat's messages, once per label style, merged into one list. */
  async refreshMessages(chatId) {
    if (chatId !== this.selectedChat) return;
    // One refresh at a time per chat; a request for another while one runs runs once after it.
    let state = this.refreshing.get(chatId);
    if (state && state.running) {
      state.again = true;
      return;
    }
    state = { running: true, again: false };
    this.refreshing.set(chatId, state);
    try {
      do {
        state.again = false;
        const list = (style, thread) =>
          this.api(
            "GET",
            `/v1/chats/${encodeURIComponent(chatId)}/messages?viewer=${encodeURIComponent(this.user)}` +
              `&limit=50&labels=${style}&tz=${encodeURIComponent(TIME_ZONE)}` +
              (thread ? `&thread=${encodeURIComponent(thread)}` : ""),
          );
        const pages = await Promise.all(LABEL_STYLES.map((style) => list(style)));
        // Each thread's replies, under their root (ticks only).
        const roots = pages[0].messages.filter((message) => message.thread);
        const threads = new Map(
          await Promise.all(roots.map(async (root) => [root.id, (await list("ticks", root.id)).messages])),
        );
        if (chatId === this.selectedChat) this.showMessages(pages, threads);
      } while (state.again);
    } catch (error) {
      this.log(`listing failed: ${error.message}`);
    } finally {
      state.running = false;
    }
  }

  showMessages(pages, threads) {
    const [ticks, counts, imessage] = pages.map((page) => new Map(page.messages.map((message) => [message.id, message])));
    const list = $(this.element, ".messages");
    list.replaceChildren();
    for (const message of pages[0].messages) {
      const item = this.messageItem(message, ticks, counts, imessage);
      const replies = threads.get(message.id) ?? [];
      if (replies.length > 0) {
        const thread = document.createElement("ol");
        thread.className = "replies";
        const replyTicks = new Map(replies.map((reply) => [reply.id, reply]));
        for (const reply of replies) thread.appendChild(this.messageItem(reply, replyTicks, new Map(), new Map()));
        item.appendChild(thread);
      }
      list.appendChild(item);
    }
    list.scrollTop = list.scrollHeight;
  }

  /** One message: sender, text (edited, mentions), receipt labels on one's own, and actions. */
  messageItem(message, ticks, counts, imessage) {
    const own = message.senderId === this.user;
    const item = document.createElement("li");
    item.className = `message ${own ? "own" : "theirs"}${message.threadId ? " reply" : ""}`;
    item.dataset.id = message.id;
    const unread = !own && !message.readBy.includes(this.user);
    item.classList.toggle("unread", unread);
    item.classList.toggle("mentions-me", message.mentions.includes(this.user));
    const sender = document.createElement("span");
    sender.className = "sender";
    sender.textContent = own ? "You" : capitalized(message.senderId);
    const text = document.createElement("p");
    text.className = "text";
    text.textContent = message.text;
    item.append(sender, text);
    const details = document.createElement("div");
    details.className = "details";
    if (message.editedAt) {
      const edited = document.createElement("span");
      edited.className = "edited";
      edited.textContent = "edited";
      details.appendChild(edited);
    }
    if (message.thread) {
      const summary = document.createElement("span");
      summary.className = "thread-summary";
      summary.textContent = `${message.thread.replies} ${message.thread.replies === 1 ? "reply" : "replies"}`;
      details.appendChild(summary);
    }
    if (!message.threadId) details.appendChild(this.action("Reply", "reply", () => this.setMode({ kind: "reply", messageId: message.id, text: message.text })));
    if (own) details.appendChild(this.action("Edit", "edit", () => this.setMode({ kind: "edit", messageId: message.id, text: message.text })));
    item.appendChild(details);
    if (own) {
      const receipt = document.createElement("div");
      receipt.className = "receipt";
      const tickLabel = ticks.get(message.id)?.receipt?.label ?? "Sent";
      const tick = document.createElement("span");
      tick.className = `ticks ${tickLabel.toLowerCase()}`;
      tick.dataset.label = tickLabel;
      tick.title = `ticks: ${tickLabel}`;
      tick.textContent = TICKS[tickLabel] ?? tickLabel;
      const countLabel = document.createElement("span");
      countLabel.className = "label counts";
      countLabel.title = "counts";
      countLabel.textContent = counts.get(message.id)?.receipt?.label ?? "";
      const timeLabel = document.createElement("span");
      timeLabel.className = "label imessage";
      timeLabel.title = "imessage";
      timeLabel.textContent = imessage.get(message.id)?.receipt?.label ?? "";
      receipt.append(tick, countLabel, timeLabel);
      item.appendChild(receipt);
    }
    return item;
  }

  action(label, name, run) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `action ${name}`;
    button.textContent = label;
    button.addEventListener("click", run);
    return button;
  }

  async refreshUnread() {
    try {
      const unread = await this.api("GET", `/v1/users/${encodeURIComponent(this.user)}/unread`);
      $(this.element, ".total-badge").textContent = unread.badge;
      $(this.element, ".mention-badge").textContent = unread.mentionsBadge ? `@${unread.mentionsBadge}` : "";
      const byChat = new Map(unread.chats.map((chat) => [chat.chatId, chat]));
      for (const tab of this.element.querySelectorAll(".chat-tab")) {
        const chat = byChat.get(tab.dataset.chat);
        $(tab, ".badge").textContent = chat?.badge ?? "";
        $(tab, ".badge.mention").textContent = chat?.mentions ? "@" : "";
      }
    } catch (error) {
      this.log(`unread failed: ${error.message}`);
    }
  }

  /** What an event of the stream changes on screen. */
  onEvent(event) {
    if (event.id) this.lastEventId = event.id;
    this.log(`${event.type}${event.chatId ? " " + event.chatId : ""}${event.userId ? " by " + event.userId : ""}`);
    switch (event.type) {
      case "message.created":
        if (event.userId !== this.user) this.markDelivered(event.chatId, event.messageIds);
        this.refreshMessages(event.chatId);
        this.refreshUnread();
        break;
      case "receipt.read":
      case "receipt.delivered":
      case "message.edited":
      case "message.deleted":
        this.refreshMessages(event.chatId);
        if (event.type === "message.deleted") this.refreshUnread();
        break;
      case "unread.changed":
        this.refreshUnread();
        break;
      default:
        // resync.required, chat.deleted, types this page does not know: look again.
        this.refreshMessages(this.selectedChat);
        this.refreshUnread();
    }
  }

  log(text) {
    const log = $(this.element, ".event-log");
    const item = document.createElement("li");
    item.textContent = `${new Date().toLocaleTimeString()} ${text}`;
    log.prepend(item);
    while (log.children.length > 30) log.lastElementChild.remove();
  }

  setStreamState(state) {
    const element = $(this.element, ".stream-state");
    element.dataset.state = state;
    element.textContent = state === "live" ? `● ${demo.transport === "sse" ? "SSE" : "WebSocket"}` : `○ ${state}`;
    updateStatus();
  }

  /** Opens the event stream (WebSocket or SSE), resuming after the last event seen. */
  connect() {
    this.disconnect();
    const after = this.lastEventId;
    if (demo.transport === "sse") {
      const query = `token=${encodeURIComponent(this.token)}` + (after ? `&after=${encodeURIComponent(after)}` : "");
      const source = new EventSource(`/v1/events?${query}`);
      this.stream = source;
      source.onopen = () => this.setStreamState("live");
      source.onmessage = (message) => this.onEvent(JSON.parse(message.data));
      source.onerror = () => {
        if (this.stream !== source) return;
        // EventSource reconnects by itself (with Last-Event-ID) unless the server refused it.
        if (source.readyState === EventSource.CLOSED) this.scheduleReconnect();
        else this.setStreamState("reconnecting");
      };
    } else {
      const scheme = location.protocol === "https:" ? "wss" : "ws";
      const query = `token=${encodeURIComponent(this.token)}` + (after ? `&after=${encodeURIComponent(after)}` : "");
      const socket = new WebSocket(`${scheme}://${location.host}/v1/stream?${query}`);
      this.stream = socket;
      socket.onopen = () => {
        this.reconnectDelay = 250;
        this.setStreamState("live");
      };
      socket.onmessage = (message) => this.onEvent(JSON.parse(message.data));
      socket.onclose = (close) => {
        if (this.stream !== socket) return;
        this.log(`stream closed: ${close.code} ${close.reason}`);
        // 1001 (the server restarts) and 1008 (the token ended: a new session brings a new one)
        // are both answered by resuming.
        if (close.code === 1008) scheduleSessionRefresh(0);
        this.scheduleReconnect();
      };
    }
    // The page got its first events: refresh what the stream may not have told.
    this.refreshMessages(this.selectedChat);
    this.refreshUnread();
  }

  scheduleReconnect() {
    this.setStreamState("reconnecting");
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.connect(), this.reconnectDelay);
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, 5000);
  }

  disconnect() {
    clearTimeout(this.reconnectTimer);
    const stream = this.stream;
    this.stream = null;
    if (stream) stream.close();
  }
}

function updateStatus() {
  const live = demo.panes.filter((pane) => $(pane.element, ".stream-state").dataset.state === "live").length;
  if (live === demo.panes.length) setStatus(`live (${demo.transport === "sse" ? "Server-Sent Events" : "WebSocket"})`, "live");
  else setStatus("connecting…", "connecting");
}

/** Gets new tokens before the old ones expire (or at once after a 401), and reconnects. */
function scheduleSessionRefresh(delayMilliseconds) {
  clearTimeout(demo.refreshTimer);
  demo.refreshTimer = setTimeout(async () => {
    try {
      const session = await fetchSession();
      demo.session = session;
      for (const pane of demo.panes) {
        pane.token = session.users.find((user) => user.userId === pane.user).token;
        pane.connect();
      }
      scheduleSessionRefresh(session.ttlSeconds * 800);
    } catch (error) {
      setStatus(`could not renew the demo tokens: ${error.message}`, "error");
      scheduleSessionRefresh(5000);
    }
  }, delayMilliseconds);
}

async function start() {
  try {
    demo.session = await fetchSession();
  } catch (error) {
    setStatus(`the demo could not start: ${error.message}`, "error");
    return;
  }
  const panes = document.getElementById("panes");
  for (const user of demo.session.users) {
    const pane = new Pane(user.userId, user.token, demo.session.chats);
    demo.panes.push(pane);
    panes.appendChild(pane.element);
  }
  for (const pane of demo.panes) pane.connect();
  scheduleSessionRefresh(demo.session.ttlSeconds * 800);
  document.getElementById("transport").addEventListener("change", (event) => {
    demo.transport = event.target.value;
    for (const pane of demo.panes) pane.connect();
  });
}

document.addEventListener("DOMContentLoaded", start);
