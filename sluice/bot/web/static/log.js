// The job page's live log: the server-sent events of /api/v1/jobs/<id>/log, each line
// appended as text (never as HTML), until the stream's "end" event. A response ends
// every few seconds without it: the EventSource reconnects by itself and the server goes
// on from the last line's id.
"use strict";
(function () {
  const log = document.getElementById("log");
  const state = document.getElementById("log-state");
  if (!log || !state) return;
  const source = new EventSource(log.dataset.stream);
  source.onmessage = function (event) {
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.append(document.createTextNode(event.data + "\n"));
    if (atEnd) log.scrollTop = log.scrollHeight;
  };
  source.addEventListener("end", function (event) {
    source.close();
    state.textContent = "ended: " + event.data;
    state.dataset.ended = "true";
  });
  source.onerror = function () {
    if (state.dataset.ended || source.readyState !== EventSource.CLOSED) return;
    state.textContent = "the connection was lost; reload to follow it again";
  };
})();
