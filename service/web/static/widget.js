// The solr-rag chat widget. Include it in any page:
//
//   <script src="https://rag.example.org/ui/widget.js"
//           data-endpoint="https://rag.example.org"   (default: where the script comes from)
//           data-target="element-id"                  (default: a floating chat button)
//           data-api-key="..."                        (when the service requires one)
//           data-title="Ask the documents"
//           data-lang="fr"></script>                   (default: the page's <html lang>, else
//                                                        the browser's; en or fr labels)
//
// It streams answers from POST /ai/rag, keeps the conversation in the page (sent as `history`;
// the service uses it when chat memory is on), shows sources as links, and errors as the
// service's user-facing message, and marks the sentences its sources do not support (grounding).
// Every text is put in the DOM with textContent: answers and documents can never inject HTML.
"use strict";

(function () {
  const script = document.currentScript;
  // The labels a person reads, in the widget's language: data-lang, else the page's, else the
  // browser's (English when none of them is French). Answers come in the question's language
  // whatever this is (the service tells it from the question); data-lang is also sent as
  // `lang`, asking for answers in it.
  const LABELS = {
    en: {
      title: "Ask the documents",
      unreachable: "Sorry, the service cannot be reached. Please try again later.",
      newConversation: "New conversation",
      conversation: "Conversation",
      question: "Your question",
      send: "Send",
      unsupported: "Not supported by the sources",
      sources: "Sources",
      untitled: "Untitled document",
      you: "You: ",
      answer: "Answer: ",
      searching: "Searching the documents...",
    },
    fr: {
      title: "Interroger les documents",
      unreachable: "Désolé, le service est injoignable. Veuillez réessayer plus tard.",
      newConversation: "Nouvelle conversation",
      conversation: "Conversation",
      question: "Votre question",
      send: "Envoyer",
      unsupported: "Non étayé par les sources",
      sources: "Sources",
      untitled: "Document sans titre",
      you: "Vous : ",
      answer: "Réponse : ",
      searching: "Recherche dans les documents...",
    },
  };
  const asked = (script.dataset.lang || "").trim();
  const language = (asked || document.documentElement.lang || navigator.language || "en")
    .slice(0, 2)
    .toLowerCase();
  const LABEL = LABELS[language] || LABELS.en;
  const options = {
    endpoint: (script.dataset.endpoint || new URL(script.src, location.href).origin).replace(/\/$/, ""),
    target: script.dataset.target || "",
    apiKey: script.dataset.apiKey || "",
    title: script.dataset.title || LABEL.title,
    lang: /^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$/.test(asked) ? asked : "",
  };
  const UNREACHABLE = LABEL.unreachable;
  // What the service accepts of a history (100 messages of 20,000 characters) is far more
  // than it uses (chat.memory.history.size, 6 by default): send the recent part only, so a
  // long conversation never becomes a request the service must refuse.
  const HISTORY_MESSAGES = 20;
  const HISTORY_MESSAGE_CHARS = 4000;
  const QUESTION_CHARS = 20000;
  let history = [];
  let busy = false;
  let counter = 0;

  function element(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // -- building the widget ----------------------------------------------------------------

  const id = "solr-rag-" + Math.random().toString(36).slice(2, 8);
  const root = element("section", { class: "solr-rag-chat", "aria-label": options.title });
  const header = element("div", { class: "chat-header" });
  const heading = element("h2", { class: "chat-title" }, options.title);
  const reset = element("button", { type: "button", class: "new-conversation" }, LABEL.newConversation);
  header.append(heading, reset);
  const log = element("ol", { class: "chat-log", role: "log", "aria-live": "polite", "aria-label": LABEL.conversation });
  const form = element("form", { class: "chat-form" });
  const label = element("label", { for: id + "-question" }, LABEL.question);
  const question = element("textarea", {
    id: id + "-question",
    rows: "2",
    maxlength: "20000",
    required: "",
    "aria-describedby": id + "-keys",
  });
  const keys = element("p", { id: id + "-keys", class: "chat-keys" }, "Enter sends; Shift+Enter starts a new line.");
  const send = element("button", { type: "submit", class: "send" }, LABEL.send);
  form.append(label, question, send, keys);
  root.append(header, log, form);

  function mount() {
    if (!document.querySelector('link[data-solr-rag-style]')) {
      const style = element("link", { rel: "stylesheet", href: options.endpoint + "/static/widget.css" });
      style.dataset.solrRagStyle = "";
      document.head.append(style);
    }
    const host = options.target && document.getElementById(options.target);
    if (host) {
      host.append(root);
      return;
    }
    const toggle = element("button", { type: "button", class: "solr-rag-toggle", "aria-expanded": "false" }, options.title);
    root.classList.add("floating");
    root.hidden = true;
    toggle.addEventListener("click", () => {
      root.hidden = !root.hidden;
      toggle.setAttribute("aria-expanded", String(!root.hidden));
      if (!root.hidden) question.focus();
    });
    document.body.append(toggle, root);
  }

  // -- rendering answers, Markdown-safe ------------------------------------------------------

  // A small Markdown subset: paragraphs, "-"/"*"/"1." lists, **bold**, `code`, and [n] citations
  // turned into links to the sources. Only text nodes and known elements are created.
  function inline(parent, text, sourceLinks) {
    const pattern = /(\uE000[^\uE001]*\uE001|\*\*[^*]+\*\*|`[^`]+`|\[\d{1,3}\])/g;
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match.index > last) parent.append(document.createTextNode(text.slice(last, match.index)));
      const token = match[0];
      if (token.startsWith("\uE000")) {
        // a sentence its sources do not support (grounding)
        const marked = element("span", { class: "unsupported", title: LABEL.unsupported });
        inline(marked, token.slice(1, -1), sourceLinks);
        marked.append(element("span", { class: "visually-hidden" }, " (not supported by the sources)"));
        parent.append(marked);
      } else if (token.startsWith("**")) parent.append(element("strong", {}, token.slice(2, -2)));
      else if (token.startsWith("`")) parent.append(element("code", {}, token.slice(1, -1)));
      else {
        const number = Number(token.slice(1, -1));
        const target = sourceLinks.get(number);
        if (target) {
          const link = element("a", { href: "#" + target, class: "citation" }, token);
          parent.append(link);
        } else parent.append(document.createTextNode(token));
      }
      last = match.index + token.length;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  }

  function renderAnswer(container, text, sourceLinks) {
    container.replaceChildren();
    for (const block of text.split(/\n{2,}/)) {
      const lines = block.split("\n").filter((line) => line.trim() !== "");
      if (lines.length === 0) continue;
      const bullets = lines.every((line) => /^\s*([-*]|\d+[.)])\s+/.test(line));
      if (bullets) {
        const ordered = /^\s*\d/.test(lines[0]);
        const list = element(ordered ? "ol" : "ul");
        for (const line of lines) {
          const item = element("li");
          inline(item, line.replace(/^\s*([-*]|\d+[.)])\s+/, ""), sourceLinks);
          list.append(item);
        }
        container.append(list);
      } else {
        const paragraph = element("p");
        lines.forEach((line, index) => {
          if (index > 0) paragraph.append(element("br"));
          inline(paragraph, line, sourceLinks);
        });
        container.append(paragraph);
      }
    }
  }

  // The text with each unsupported sentence between \uE000 and \uE001 (private-use characters),
  // which inline() renders marked. A sentence never spans a line, so neither do the marks. The
  // offsets count code points (Python's), hence Array.from rather than UTF-16 indices.
  function withMarks(text, sentences) {
    if (/[\uE000\uE001]/.test(text)) return text; // the answer uses them itself: no marks
    const chars = Array.from(text);
    const spans = sentences.filter((s) => !s.supported && s.start < s.end && s.end <= chars.length);
    for (const s of spans.sort((a, b) => b.start - a.start)) {
      chars.splice(s.end, 0, "\uE001");
      chars.splice(s.start, 0, "\uE000");
    }
    return chars.join("");
  }

  // a source's own web address, absolute http(s) only: an empty or relative one would
  // resolve against this page (a link to the chat itself)
  function safeUrl(url) {
    try {
      const parsed = new URL(url);
      return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "";
    } catch (_) {
      return "";
    }
  }

  function renderSources(message, documents) {
    const links = new Map();
    if (!documents.length) return links;
    const box = element("div", { class: "sources" });
    box.append(element("h3", {}, LABEL.sources));
    const list = element("ol");
    documents.forEach((doc, index) => {
      const anchor = `${id}-src-${counter}-${index + 1}`;
      links.set(index + 1, anchor);
      const item = element("li", { id: anchor, class: doc.cited ? "cited" : "uncited" });
      const url = safeUrl(doc.url || "");
      const title = doc.title || doc.id || LABEL.untitled;
      if (url) {
        item.append(element("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, title));
      } else {
        // a file:// path or none: no dead link; the passage the answer was given, on demand
        const details = element("details", { class: "passage" });
        details.append(element("summary", {}, title));
        if (doc.url) details.append(element("p", { class: "location" }, doc.url));
        details.append(element("blockquote", {}, (doc.content || "").slice(0, 1200)));
        item.append(details);
      }
      if (doc.cited) item.append(element("span", { class: "badge" }, "cited"));
      list.append(item);
    });
    box.append(list);
    message.append(box);
    return links;
  }

  function addMessage(role, text) {
    const item = element("li", { class: "message " + role });
    item.append(element("span", { class: "visually-hidden" }, role === "user" ? LABEL.you : LABEL.answer));
    const body = element("div", { class: "body" });
    if (text !== undefined) body.textContent = text;
    item.append(body);
    log.append(item);
    item.scrollIntoView({ block: "end" });
    return { item, body };
  }

  function showError(message, text) {
    message.item.classList.add("error");
    message.body.replaceChildren(element("p", { role: "alert" }, text));
  }

  // -- talking to the service -------------------------------------------------------------

  function errorMessage(data) {
    return (data && data.content && data.content.message) || UNREACHABLE;
  }

  async function* events(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        yield { name, data: JSON.parse(data.join("\n")) };
      }
    }
  }

  function recentHistory() {
    return history.slice(-HISTORY_MESSAGES).map((message) => ({
      role: message.role,
      content: message.content.slice(0, HISTORY_MESSAGE_CHARS),
    }));
  }

  async function ask(text) {
    busy = true;
    send.disabled = true;
    root.setAttribute("aria-busy", "true");
    counter += 1;
    addMessage("user", text);
    const answer = addMessage("assistant");
    answer.body.append(element("p", { class: "thinking" }, LABEL.searching));
    const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    if (options.apiKey) headers["X-API-Key"] = options.apiKey;
    let written = "";
    try {
      const response = await fetch(options.endpoint + "/ai/rag", {
        method: "POST",
        headers,
        body: JSON.stringify({
          query: text,
          history: recentHistory(),
          stream: true,
          ...(options.lang ? { lang: options.lang } : {}),
        }),
      });
      const type = response.headers.get("content-type") || "";
      if (!response.ok || !type.startsWith("text/event-stream")) {
        let data = null;
        try {
          data = await response.json();
        } catch (_) {
          data = null;
        }
        showError(answer, errorMessage(data));
        return;
      }
      let links = new Map();
      let grounding = [];
      let finished = false;
      for await (const event of events(response)) {
        if (event.name === "token") {
          written += event.data.text;
          renderAnswer(answer.body, written, links);
        } else if (event.name === "grounding") {
          grounding = event.data.sentences || [];
        } else if (event.name === "sources") {
          links = renderSources(answer.item, event.data.documents || []);
          renderAnswer(answer.body, written, links);
        } else if (event.name === "done") {
          // the offsets are in the text as streamed; an answer grounding changed has no marks
          const streamed = written;
          written = event.data.message || written;
          renderAnswer(answer.body, written === streamed ? withMarks(written, grounding) : written, links);
          finished = true;
        } else if (event.name === "error") {
          showError(answer, errorMessage(event.data));
          return;
        }
      }
      if (!finished) {
        showError(answer, UNREACHABLE);
        return;
      }
      history = history
        .concat([
          { role: "user", content: text },
          { role: "assistant", content: written },
        ])
        .slice(-HISTORY_MESSAGES);
    } catch (_) {
      showError(answer, UNREACHABLE);
    } finally {
      busy = false;
      send.disabled = false;
      root.removeAttribute("aria-busy");
      question.focus();
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = question.value.trim().slice(0, QUESTION_CHARS);
    if (!text || busy) return;
    question.value = "";
    ask(text);
  });
  question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  reset.addEventListener("click", () => {
    history = [];
    log.replaceChildren();
    question.value = "";
    question.focus();
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount);
  else mount();
})();
