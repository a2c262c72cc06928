// madrag web app: live run progress (server-sent events, falling back to polling) and small page helpers.
// Every value from the server is put into the page with textContent, never as HTML.
(function () {
  "use strict";

  function byId(id) { return document.getElementById(id); }

  function showProgress(p) {
    if (!p) { return; }
    var bar = byId("run-bar");
    if (p.total) { bar.max = p.total; byId("run-total").textContent = String(p.total); }
    bar.value = p.done;
    byId("run-done").textContent = String(p.done);
    byId("run-records").textContent = String(p.records);
    byId("run-stage").textContent = p.stage || "";
    var status = byId("run-status");
    status.textContent = p.status;
    status.className = "status " + p.status;
    showPace(p);
  }

  function words(seconds) {
    if (seconds < 90) { return "about " + Math.max(1, Math.round(seconds)) + " s"; }
    var minutes = Math.round(seconds / 60);
    return minutes < 90 ? "about " + minutes + " min" : "about " + Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }

  function showPace(p) {
    var box = byId("run-pace");
    if (!box) { return; }
    if (p.eta_s !== null && p.eta_s !== undefined) {
      box.textContent = "Time left: " + words(p.eta_s) + " (" + p.per_call_s.toFixed(1) + " s per call so far, about " + p.calls_left + " calls to go)";
    } else if (p.per_call_s !== null && p.per_call_s !== undefined) {
      box.textContent = p.per_call_s.toFixed(1) + " s per call so far; the time left shows once the first essay is done";
    } else if (p.status === "queued" || p.status === "running") {
      box.textContent = "waiting for the first answer: the time left shows once calls come back";
    } else { box.textContent = ""; }
  }

  function watchRefresh(box) {
    // a page waiting for a run (calibration): reload it once the run has ended, without a meta refresh
    fetch("/api/runs/" + encodeURIComponent(box.dataset.waitFor), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (run) {
        if (run.status === "queued" || run.status === "running") { window.setTimeout(function () { watchRefresh(box); }, 2000); }
        else { window.location.reload(); }
      })
      .catch(function () { window.setTimeout(function () { watchRefresh(box); }, 4000); });
  }

  function watchApproval(box) {
    // a bulk approval being written: its count read again each second (the page itself, parsed), and the page
    // it goes back to once written; without script the page's "check again" link does the same by hand
    fetch(window.location.href, { headers: { Accept: "text/html" } })
      .then(function (r) {
        if (r.redirected) { window.location.assign(r.url); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        var page = new DOMParser().parseFromString(html, "text/html");
        if (!page.getElementById("approval")) { window.location.reload(); return; }
        ["approval-done", "approval-total"].forEach(function (id) {
          var found = page.getElementById(id);
          if (found && byId(id)) { byId(id).textContent = found.textContent; }
        });
        var bar = byId("approval-bar");
        var fresh = page.getElementById("approval-bar");
        if (bar && fresh) { bar.max = Number(fresh.getAttribute("max")); bar.value = Number(fresh.getAttribute("value")); }
        if (!byId("approval-done") && page.getElementById("approval-done")) { window.location.reload(); return; }
        window.setTimeout(function () { watchApproval(box); }, 1000);
      })
      .catch(function () { window.setTimeout(function () { watchApproval(box); }, 3000); });
  }

  function logLine(text) {
    var log = byId("run-log");
    var item = document.createElement("li");
    item.textContent = text;
    log.insertBefore(item, log.firstChild);
    while (log.children.length > 60) { log.removeChild(log.lastChild); }
  }

  function describe(event) {
    if (event.type === "record") {
      var score = event.role === "judge" ? " score " + (event.score === null ? "missing" : event.score) : "";
      return event.role + " · essay " + event.essay_id + " · " + event.trait + score;
    }
    if (event.type === "stage") { return event.message; }
    if (event.type === "status") { return "status: " + event.status + (event.error ? " (" + event.error + ")" : ""); }
    return null;
  }

  function finish() { window.setTimeout(function () { window.location.reload(); }, 300); }

  function poll(runId) {
    fetch("/api/runs/" + encodeURIComponent(runId), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (run) {
        showProgress(run.progress || { status: run.status, done: 0, records: 0 });
        if (run.status === "queued" || run.status === "running") { window.setTimeout(function () { poll(runId); }, 1000); }
        else { finish(); }
      })
      .catch(function () { window.setTimeout(function () { poll(runId); }, 2000); });
  }

  function watchRun(panel) {
    var runId = panel.dataset.run;
    if (panel.dataset.status !== "queued" && panel.dataset.status !== "running") { return; }
    if (!window.EventSource) { poll(runId); return; }
    var source = new EventSource("/api/runs/" + encodeURIComponent(runId) + "/events");
    source.onmessage = null;
    ["snapshot", "start", "stage", "bank", "record", "essay", "status", "end"].forEach(function (kind) {
      source.addEventListener(kind, function (msg) {
        var event = JSON.parse(msg.data);
        showProgress(event.progress);
        var line = describe(event);
        if (line) { logLine(line); }
        if (kind === "end") { source.close(); finish(); }
      });
    });
    source.onerror = function () { source.close(); poll(runId); };
  }

  function watchEstimate(box) {
    var status = box.dataset.status;
    if (status !== "queued" && status !== "running") { return; }
    fetch("/api/runs/" + encodeURIComponent(box.dataset.run), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (run) {
        if (run.status === "queued" || run.status === "running") { window.setTimeout(function () { watchEstimate(box); }, 700); }
        else { window.location.reload(); }
      });
  }

  function backendFields() {
    // a field of the backend step is for the kinds its data-kinds lists: shown (and sent) only when one of them
    // is chosen, every one before a choice; the Server URL's placeholder is the chosen kind's
    var form = byId("backend-form");
    if (!form) { return; }
    var url = form.querySelector("input[name=base_url]");
    var placeholders = url && url.dataset.placeholders ? JSON.parse(url.dataset.placeholders) : {};
    function sync() {
      var chosen = form.querySelector("input[name=kind]:checked");
      form.querySelectorAll("[data-kinds]").forEach(function (part) {
        var on = !chosen || part.dataset.kinds.split(" ").indexOf(chosen.value) >= 0;
        part.hidden = !on;
        part.querySelectorAll("input, select, button").forEach(function (field) { field.disabled = !on; });
      });
      if (url && chosen && Object.prototype.hasOwnProperty.call(placeholders, chosen.value)) {
        url.placeholder = placeholders[chosen.value];
      }
    }
    form.querySelectorAll("input[name=kind]").forEach(function (r) { r.addEventListener("change", sync); });
    sync();
  }

  function anchoredSection() {
    // the criterion the page was opened at (#trait-NAME: the desk's link, or the page after a save), else none
    var hash = window.location.hash;
    if (!hash || hash.indexOf("#trait-") !== 0) { return null; }
    var id;
    try { id = decodeURIComponent(hash.slice(1)); } catch (err) { return null; }
    var found = document.getElementById(id);
    return found && found.matches("section.trait") ? found : null;
  }

  function focusedIn(selector) {
    var active = document.activeElement;
    return active && active !== document.body && active.closest ? active.closest(selector) : null;
  }

  function gradingKeys() {
    // a digit clicks that level of the criterion the teacher is on, never another: on the essay page the
    // criterion holding the focus, else the one in the URL's #trait-NAME, else nothing; on the review desk the
    // row holding the focus, else nothing. n / p: next / previous student (the essay page). Typing in a field
    // is left alone (Enter there sends the form's default button: the comment, never a level).
    var sections = document.querySelectorAll("section.trait");
    var desk = byId("review-queue");
    if (!sections.length && !desk) { return; }
    function current() {
      if (desk) { return focusedIn("tr[data-essay][data-trait]"); }
      return focusedIn("section.trait") || anchoredSection();
    }
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (e.ctrlKey || e.metaKey || e.altKey || (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT"))) { return; }
      if (/^[0-9]$/.test(e.key)) {
        var on = current();
        var level = on ? on.querySelector("button.level[value='" + e.key + "']") : null;
        if (level) { e.preventDefault(); level.click(); }
      } else if (!desk && (e.key === "n" || e.key === "p")) {
        var link = byId(e.key === "n" ? "next-essay" : "prev-essay");
        if (link) { e.preventDefault(); window.location.href = link.href; }
      }
    });
  }

  function readingPane() {
    // the review desk's reading pane follows the row the teacher is on (focus or click): that row's essay, its
    // criteria's levels, the grade in force, madrag's suggestion and reasons, from the JSON API (textContent only)
    var pane = byId("reading-pane"), table = byId("review-queue");
    if (!pane || !table) { return; }
    var asked = null;
    function el(tag, text, cls) {
      var node = document.createElement(tag);
      if (text !== undefined && text !== null) { node.textContent = String(text); }
      if (cls) { node.className = cls; }
      return node;
    }
    function mark(trait) {
      pane.querySelectorAll(".reading-trait").forEach(function (s) {
        var on = s.dataset.trait === trait;
        s.classList.toggle("current", on);
        var box = s.querySelector("details");
        if (box) { box.open = on; }
      });
    }
    function rowsOf(essay) {
      return Array.prototype.filter.call(table.querySelectorAll("tr[data-essay]"), function (r) { return r.dataset.essay === essay; });
    }
    function section(t, index, rows) {
      var entry = t.protocols.filter(function (p) { return p.grading; })[0] || t.protocols[0] || {};
      var row = rows.filter(function (r) { return r.dataset.trait === t.trait; })[0];
      var box = el("section", null, "reading-trait");
      box.dataset.trait = t.trait;
      box.setAttribute("aria-labelledby", "reading-t" + index);
      var head = el("h3", t.trait + ": ");
      head.id = "reading-t" + index;
      head.appendChild(el("span", entry.grade === null || entry.grade === undefined ? "missing" : entry.grade, "rt-grade"));
      var how = row ? row.querySelector(".how") : null;
      if (how) { head.appendChild(document.createTextNode(" ")); head.appendChild(el("small", how.textContent, "rt-how")); }
      box.appendChild(head);
      var ai = el("p", "madrag suggested ", "rt-ai");
      ai.appendChild(el("b", entry.score === null || entry.score === undefined ? "missing" : entry.score));
      var flags = row ? row.querySelector(".reasons") : null;
      if (flags) { ai.appendChild(document.createTextNode(" · ")); ai.appendChild(el("span", flags.textContent, "rt-flags")); }
      box.appendChild(ai);
      var why = el("p", null, "rt-why");
      why.appendChild(el("b", "madrag's reasons:"));
      why.appendChild(document.createTextNode(" "));
      why.appendChild(el("span", entry.rationale || "The Judge gave no reason.", "rt-reasons"));
      box.appendChild(why);
      var levels = el("details", null, "rt-levels-box");
      levels.appendChild(el("summary", "the rubric's levels of " + t.trait));
      var list = el("ul", null, "rt-levels");
      for (var s = t.min; s <= t.max; s++) {
        var item = el("li", null, s === entry.grade ? "chosen" : "");
        item.dataset.score = String(s);
        item.appendChild(el("b", s));
        item.appendChild(document.createTextNode(" " + ((t.levels || {})[s] || "")));
        list.appendChild(item);
      }
      levels.appendChild(list);
      box.appendChild(levels);
      return box;
    }
    function fill(detail, row) {
      var essay = detail.essay.id, rows = rowsOf(essay);
      pane.dataset.essay = essay;
      var link = row.querySelector("td a");
      byId("reading-name").textContent = link ? link.textContent : essay;
      byId("reading-page").href = "/runs/" + encodeURIComponent(pane.dataset.run) + "/essays/" + encodeURIComponent(essay);
      byId("reading-text").textContent = detail.essay.text;
      var traits = byId("reading-traits");
      traits.replaceChildren.apply(traits, detail.traits.map(function (t, i) { return section(t, i + 1, rows); }));
      mark(row.dataset.trait);
    }
    function show(row) {
      if (!row) { return; }
      var essay = row.dataset.essay;
      if (essay === pane.dataset.essay) { mark(row.dataset.trait); return; }
      asked = essay;
      fetch("/api/runs/" + encodeURIComponent(pane.dataset.run) + "/essays/" + encodeURIComponent(essay), { headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (detail) { if (detail && asked === essay) { fill(detail, row); } })
        .catch(function () { return null; });
    }
    function rowOf(e) { return e.target && e.target.closest ? e.target.closest("tr[data-essay]") : null; }
    table.addEventListener("focusin", function (e) { show(rowOf(e)); });
    table.addEventListener("click", function (e) { show(rowOf(e)); });
  }

  function readOnChoice() {
    // a class file is read as soon as it is chosen (the label says so); without script, the button reads it
    document.querySelectorAll("input[type=file][data-read-on-choice]").forEach(function (input) {
      input.addEventListener("change", function () {
        if (input.files && input.files.length && input.form) { input.form.requestSubmit(); }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    gradingKeys();
    readingPane();
    readOnChoice();
    var panel = byId("progress");
    if (panel) { watchRun(panel); }
    var estimate = byId("estimate");
    if (estimate && estimate.dataset.run) { watchEstimate(estimate); }
    backendFields();
    var waiting = document.querySelector("[data-wait-for]");
    if (waiting) { watchRefresh(waiting); }
    var approval = document.querySelector("[data-approval]");
    if (approval) { window.setTimeout(function () { watchApproval(approval); }, 1000); }
  });
})();
