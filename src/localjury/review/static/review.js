// localjury review: labeling by keyboard and by mouse. Plain JavaScript, no build step; the
// server renders every page, this file only sends labels and moves between records.
"use strict";

(function () {
  const item = document.getElementById("item");
  const help = document.getElementById("help");
  const UNDO = "localjury-review-undo";

  function showHelp() {
    if (help && !help.open) help.showModal();
  }
  const helpButton = document.getElementById("help-button");
  if (helpButton) helpButton.addEventListener("click", showHelp);

  function go(url) {
    if (url) window.location.assign(url);
  }

  function undoStack() {
    try {
      return JSON.parse(sessionStorage.getItem(UNDO) || "[]");
    } catch (e) {
      return [];
    }
  }

  function say(text, bad) {
    const status = document.getElementById("status");
    if (status) {
      status.textContent = text;
      status.className = bad ? "bad" : "";
    }
  }

  async function send(n, gold, note) {
    const response = await fetch("/api/label", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ n: n, gold: gold, note: note }),
      credentials: "same-origin",
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    const count = document.getElementById("label-count");
    if (count) count.textContent = String(body.labels);
    return body.label;
  }

  async function label(gold, then) {
    const n = Number(item.dataset.n);
    const note = document.getElementById("note").value;
    const before = item.dataset.gold === "" ? null : Number(item.dataset.gold);
    try {
      say("saving…");
      await send(n, gold, note);
    } catch (e) {
      say("not saved: " + e.message, true);
      return;
    }
    const stack = undoStack();
    stack.push({ n: n, gold: before, note: item.dataset.note, url: window.location.pathname + window.location.search });
    sessionStorage.setItem(UNDO, JSON.stringify(stack.slice(-200)));
    item.dataset.gold = gold === null ? "" : String(gold);
    item.dataset.note = note;
    document.getElementById("label").textContent = gold === null ? "–" : gold ? "pass" : "fail";
    say("saved");
    if (then) go(item.dataset.next || item.dataset.queue);
  }

  async function undo() {
    const stack = undoStack();
    const last = stack.pop();
    if (!last) {
      say("nothing to undo", true);
      return;
    }
    try {
      await send(last.n, last.gold, last.note || null);
    } catch (e) {
      say("not undone: " + e.message, true);
      return;
    }
    sessionStorage.setItem(UNDO, JSON.stringify(stack));
    go(last.url);
  }

  if (item) {
    item.querySelectorAll("button[data-gold]").forEach(function (b) {
      b.addEventListener("click", function () {
        label(Number(b.dataset.gold), true);
      });
    });
    const actions = {
      skip: function () { go(item.dataset.next || item.dataset.queue); },
      clear: function () { label(null, false); },
      undo: undo,
    };
    item.querySelectorAll("button[data-action]").forEach(function (b) {
      b.addEventListener("click", actions[b.dataset.action]);
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const typing = event.target instanceof HTMLTextAreaElement || event.target instanceof HTMLInputElement;
    if (typing) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (event.key === "?") {
      showHelp();
      return;
    }
    if (!item) {
      if (event.key === "Enter" || event.key === "j") {
        const first = document.querySelector("#queue a.open");
        if (first) go(first.getAttribute("href"));
      }
      return;
    }
    const keys = {
      p: function () { label(1, true); },
      f: function () { label(0, true); },
      s: function () { go(item.dataset.next || item.dataset.queue); },
      x: function () { label(null, false); },
      u: undo,
      n: function () { document.getElementById("note").focus(); },
      j: function () { go(item.dataset.next); },
      ArrowRight: function () { go(item.dataset.next); },
      k: function () { go(item.dataset.prev); },
      ArrowLeft: function () { go(item.dataset.prev); },
      q: function () { go(item.dataset.queue); },
    };
    if (keys[event.key]) {
      event.preventDefault();
      keys[event.key]();
    }
  });
})();
