// The handover log on a user's page: ask the console for new entries every few seconds
// (CONSOLE_POLL_S), add them, and update the delivery status of the person's replies.
// Text goes in with textContent, never as HTML. Served from our own origin (the CSP
// allows script from 'self' only).
(function () {
  "use strict";
  var log = document.getElementById("handover-log");
  if (!log || !log.dataset.pollUrl) {
    return;
  }
  var url = log.dataset.pollUrl;
  var next = parseInt(log.dataset.next, 10) || 0;
  var every = Math.max(1, parseInt(log.dataset.pollS, 10) || 3) * 1000;
  var status = document.getElementById("poll-status");
  var failures = 0;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function when(ts) {
    return new Date(ts * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }

  function div(cls, text) {
    var el = document.createElement("div");
    el.className = cls;
    el.textContent = text;
    return el;
  }

  function add(entry) {
    var person = entry.role === "person";
    var li = document.createElement("li");
    li.className = "msg " + (person ? "msg-person" : "msg-user");
    li.dataset.i = String(entry.i);
    li.appendChild(div("meta", (person ? "Team \u00B7 " + entry.by : "User") + " \u00B7 " + when(entry.ts)));
    li.appendChild(div("text", entry.text));
    if (person) {
      li.appendChild(div("status" + (entry.why ? " failed" : ""), entry.why || entry.status || ""));
    }
    log.appendChild(li);
  }

  function update(s) {
    var el = log.querySelector('li[data-i="' + s.i + '"] .status');
    if (el) {
      el.textContent = s.why || s.status || "";
      el.className = "status" + (s.why ? " failed" : "");
    }
  }

  function tick() {
    if (document.hidden) {
      window.setTimeout(tick, every);
      return;
    }
    fetch(url + "?since=" + next, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.redirected || !response.ok) {
          throw new Error(response.redirected ? "signed out" : "HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        failures = 0;
        data.entries.forEach(add);
        data.statuses.forEach(update);
        next = data.next;
        if (!data.active || data.folded) {
          say("The conversation was handed back to the bot. Reload the page to see its context.");
          return;
        }
        say(data.entries.length ? "" : (status && status.textContent) || "");
        window.setTimeout(tick, every);
      })
      .catch(function (err) {
        failures += 1;
        if (String(err.message) === "signed out") {
          say("Your session ended: reload the page and sign in again.");
          return;
        }
        say("Cannot reach the console (" + err.message + "); trying again\u2026");
        window.setTimeout(tick, every * Math.min(failures, 10));
      });
  }

  window.setTimeout(tick, every);
})();
