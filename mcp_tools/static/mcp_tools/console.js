/* Live dashboard of the mcp_tools admin: a WebSocket pushes the server-rendered panel when calls
   change; when the socket cannot open (or closes), the page polls a JSON endpoint instead, and
   tries the socket again now and then. No framework, no build step. */
(function () {
  "use strict";
  var root = document.getElementById("mcp-dashboard");
  if (!root) { return; }
  var stateEl = document.getElementById("mcp-live-state");
  var updatedEl = document.getElementById("mcp-updated");
  var fingerprint = root.dataset.fingerprint || "";
  var pollMs = parseInt(root.dataset.pollMs, 10) || 5000;
  var pollTimer = null;
  var socket = null;
  var retryMs = 30000;

  function setState(state, text) {
    stateEl.dataset.state = state;
    stateEl.textContent = text;
  }

  var renderedAt = Date.now();  // when the panel was last rendered: the poll says how long ago (age)

  function show(html, fp) {
    if (typeof html === "string") { root.innerHTML = html; renderedAt = Date.now(); }
    if (fp !== undefined) { fingerprint = fp; root.dataset.fingerprint = fp; }
    updatedEl.textContent = new Date().toLocaleTimeString();
    root.dispatchEvent(new CustomEvent("mcp:updated"));
  }

  function setPolling() {
    setState("polling", "live (polling every " + Math.round(pollMs / 1000) + " s)");
  }

  function poll() {
    /* With the age, the server renders a quiet panel again every 30 s, as the socket pushes it. */
    var url = root.dataset.pollUrl + "?since=" + encodeURIComponent(fingerprint) + "&age=" + (Date.now() - renderedAt);
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (data) {
        if (pollTimer) { setPolling(); }  // back from "offline" once the server answers again
        if (!data.unchanged) { show(data.html, data.fingerprint); }
      })
      .catch(function () { setState("offline", "offline (retrying)"); });
  }

  /* Also where the server closes the socket because its updates stopped (code 1011: the
     console's ticker failed, the database went away): the page polls, so it never says "live"
     over a dashboard that no longer moves. */
  function startPolling() {
    setTimeout(connect, retryMs);  // try the socket again later
    if (pollTimer) { return; }
    setPolling();
    poll();
    pollTimer = setInterval(poll, pollMs);
  }

  function stopPolling() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }

  function connect() {
    if (!("WebSocket" in window)) { startPolling(); return; }
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    try {
      socket = new WebSocket(scheme + location.host + root.dataset.wsPath);
    } catch (e) { startPolling(); return; }
    socket.onopen = function () { stopPolling(); setState("websocket", "live"); };
    socket.onmessage = function (event) {
      var data = JSON.parse(event.data);
      if (data.type === "dashboard") { show(data.html, data.fingerprint); }
    };
    socket.onclose = function () { socket = null; startPolling(); };
  }

  connect();
})();
