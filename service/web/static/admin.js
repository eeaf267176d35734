// The admin page: signs in with the admin token, builds a form from GET /admin/config (types,
// limits and help come from the server), validates in the browser, saves changed values with
// PATCH /admin/config (If-Match: the version it loaded), and shows the server's verdict.
// The DOM is built with textContent only.
"use strict";

(function () {
  const TOKEN_KEY = "solr-rag-admin-token";
  const $ = (id) => document.getElementById(id);
  let loaded = null; // {version, path, settings: [...]}, as the server sent it

  function element(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === false || value === null || value === undefined) continue;
      node.setAttribute(name, value === true ? "" : String(value));
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function show(id, message) {
    const node = $(id);
    node.textContent = message || "";
    node.hidden = !message;
  }

  async function call(method, url, body, extraHeaders) {
    const headers = { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    Object.assign(headers, extraHeaders || {});
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    return { status: response.status, data };
  }

  function problem(data, fallback) {
    const content = data && data.content;
    if (content && content.reason) return content.message + " " + content.reason;
    return fallback;
  }

  // -- the form ---------------------------------------------------------------------------

  function inputFor(item, id) {
    const disabled = item.read_only || Boolean(item.environment);
    let input;
    if (item.type === "boolean") {
      input = element("input", { type: "checkbox", id });
      input.checked = item.value === true;
    } else if (item.type === "choice") {
      input = element("select", { id });
      for (const choice of item.choices) {
        const option = element("option", { value: choice }, choice);
        option.selected = choice === item.value;
        input.append(option);
      }
    } else if (item.type === "integer" || item.type === "number") {
      input = element("input", {
        type: "number",
        id,
        required: !item.optional,
        step: item.type === "integer" ? "1" : "any",
        min: item.minimum === null || item.exclusive_minimum ? null : item.minimum,
        max: item.maximum,
      });
      input.value = item.value === null ? "" : String(item.value);
    } else if (item.type === "secret") {
      input = element("input", {
        type: "password",
        id,
        autocomplete: "new-password",
        placeholder: item.value ? "set (leave empty to keep it)" : "not set",
      });
    } else {
      input = element("input", { type: "text", id });
      input.value = item.value;
    }
    input.name = item.key;
    input.disabled = disabled;
    return input;
  }

  function fieldFor(item, container, label) {
    container.replaceChildren();
    container.dataset.key = item.key;
    const id = "field-" + item.key.replace(/[^A-Za-z0-9]/g, "-");
    const help = element("p", { id: id + "-help", class: "help" }, item.description);
    if (item.environment) help.textContent += " Set by the environment variable " + item.environment + ".";
    if (item.read_only) help.textContent += " Read-only here.";
    const input = inputFor(item, id);
    input.setAttribute("aria-describedby", id + "-help " + id + "-error");
    const title = element("label", { for: id }, label || item.key);
    const key = element("code", { class: "key" }, item.key);
    const error = element("p", { id: id + "-error", class: "field-error", role: "alert" });
    if (item.type === "boolean") {
      const row = element("div", { class: "check" });
      row.append(input, title);
      container.append(row, key, help, error);
    } else {
      container.append(title, key, input, help, error);
    }
  }

  function render(config) {
    loaded = config;
    $("config-path").textContent = config.path;
    const byKey = new Map(config.settings.map((item) => [item.key, item]));
    const main = new Set();
    for (const container of document.querySelectorAll("#main-fields .field")) {
      const item = byKey.get(container.dataset.key);
      if (!item) continue;
      main.add(item.key);
      fieldFor(item, container, container.dataset.label);
    }
    const others = $("other-fields");
    for (const node of others.querySelectorAll(".field")) node.remove();
    for (const item of config.settings) {
      if (main.has(item.key)) continue;
      const container = element("div", { class: "field" });
      fieldFor(item, container);
      others.append(container);
    }
    $("signin").hidden = true;
    $("config").hidden = false;
  }

  function valueOf(item, input) {
    if (item.type === "boolean") return input.checked;
    if (item.type === "integer") return input.value === "" ? null : Number(input.value);
    if (item.type === "number") return input.value === "" ? null : Number(input.value);
    return input.value;
  }

  function changes() {
    const changed = {};
    for (const item of loaded.settings) {
      const input = document.querySelector(`[name="${CSS.escape(item.key)}"]`);
      if (!input || input.disabled) continue;
      if (item.type === "secret") {
        if (input.value !== "") changed[item.key] = input.value;
        continue;
      }
      const value = valueOf(item, input);
      if (value !== item.value) changed[item.key] = value;
    }
    return changed;
  }

  function clearFieldErrors() {
    for (const node of document.querySelectorAll(".field-error")) node.textContent = "";
    for (const node of document.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  }

  function markField(key, message) {
    const input = document.querySelector(`[name="${CSS.escape(key)}"]`);
    if (!input) return;
    input.setAttribute("aria-invalid", "true");
    const error = document.getElementById(input.id + "-error");
    if (error) error.textContent = message;
    const details = input.closest("details");
    if (details) details.open = true;
    input.focus();
  }

  // -- actions ----------------------------------------------------------------------------

  async function load() {
    const { status, data } = await call("GET", "/admin/config");
    if (status !== 200) {
      sessionStorage.removeItem(TOKEN_KEY);
      $("signin").hidden = false;
      $("config").hidden = true;
      show("signin-error", problem(data, "The service answered " + status + "."));
      return;
    }
    show("signin-error", "");
    render(data);
    watchJobs();
  }

  async function save(event) {
    event.preventDefault();
    clearFieldErrors();
    show("save-error", "");
    $("save-status").textContent = "";
    const form = $("config");
    for (const input of form.querySelectorAll("input, select")) {
      if (!input.disabled && !input.checkValidity()) {
        markField(input.name, input.validationMessage);
        show("save-error", "Please correct the highlighted value.");
        return;
      }
    }
    const changed = changes();
    if (Object.keys(changed).length === 0) {
      $("save-status").textContent = "Nothing to save.";
      return;
    }
    const { status, data } = await call("PATCH", "/admin/config", changed, {
      "If-Match": loaded.version,
    });
    if (status === 200) {
      render(data);
      $("save-status").textContent = "Saved: " + Object.keys(changed).join(", ") + ".";
      return;
    }
    const reason = problem(data, "The service answered " + status + ".");
    show("save-error", reason);
    const key = Object.keys(changed).find((name) => reason.includes(name));
    if (key) markField(key, reason);
  }

  async function testConnection() {
    const table = $("connection");
    const body = table.querySelector("tbody");
    body.replaceChildren(element("tr", {}, ""));
    body.firstChild.append(element("td", { colspan: 3 }, "Testing..."));
    table.hidden = false;
    const { status, data } = await call("POST", "/admin/test-connection");
    body.replaceChildren();
    if (status !== 200) {
      show("save-error", problem(data, "The service answered " + status + "."));
      table.hidden = true;
      return;
    }
    for (const [name, result] of Object.entries(data)) {
      const row = element("tr", { class: "status-" + result.status });
      row.append(
        element("th", { scope: "row" }, name),
        element("td", {}, result.status),
        element("td", {}, result.reason || result.model || ""),
      );
      body.append(row);
    }
  }

  // -- ingestion jobs ---------------------------------------------------------------------

  let jobsTimer = null;

  async function loadJobs() {
    const { status, data } = await call("GET", "/jobs");
    const section = $("jobs");
    section.hidden = false;
    if (status !== 200) {
      // jobs off (403 ErrorNotEnabled) says so once, without refreshing
      show("jobs-error", problem(data, "The service answered " + status + "."));
      $("jobs-table").hidden = true;
      return false;
    }
    show("jobs-error", "");
    const body = $("jobs-table").querySelector("tbody");
    body.replaceChildren();
    for (const job of data.jobs) {
      const row = element("tr", { class: "job-" + job.state, "data-job": job.id });
      const bar = element("progress", {
        max: Math.max(job.total, 1),
        value: job.done,
        "aria-label": "job " + job.id + " progress",
      });
      const progress = element("td");
      progress.append(bar, element("span", {}, " " + job.done + " / " + job.total));
      const eta = job.state === "running" && job.eta_seconds !== null
        ? Math.round(job.eta_seconds) + " s" : "";
      const action = element("td");
      if (job.state === "queued" || job.state === "running") {
        const cancel = element("button", { type: "button" }, job.cancel_requested ? "Cancelling" : "Cancel");
        cancel.disabled = job.cancel_requested;
        cancel.addEventListener("click", async () => {
          cancel.disabled = true;
          await call("DELETE", "/jobs/" + encodeURIComponent(job.id));
          loadJobs();
        });
        action.append(cancel);
      }
      row.append(
        element("th", { scope: "row" }, job.id.slice(0, 8)),
        element("td", {}, job.state),
        progress,
        element("td", {}, String(job.failed)),
        element("td", {}, eta),
        action,
      );
      body.append(row);
    }
    $("jobs-table").hidden = data.jobs.length === 0;
    $("jobs-empty").hidden = data.jobs.length !== 0;
    return true;
  }

  async function watchJobs() {
    clearTimeout(jobsTimer);
    if (await loadJobs()) jobsTimer = setTimeout(watchJobs, 3000);
  }

  $("signin").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("admin-token").value);
    load();
  });
  $("config").addEventListener("submit", save);
  $("test-connection").addEventListener("click", testConnection);
  $("reload").addEventListener("click", load);
  if (sessionStorage.getItem(TOKEN_KEY)) load();
})();
