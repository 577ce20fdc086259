// idemrun dashboard: confirmations before actions, and live figures on
// the pages that have them (#live is reloaded from the same URL with
// partial=1, which the server renders as that block alone).
(function () {
  'use strict';

  document.addEventListener('submit', function (e) {
    var msg = e.target.getAttribute('data-confirm');
    if (msg && !window.confirm(msg)) {
      e.preventDefault();
    }
  });

  var main = document.getElementById('main');
  var live = document.getElementById('live');
  var secs = main ? parseInt(main.getAttribute('data-refresh'), 10) : 0;
  if (!live || !(secs > 0)) {
    return;
  }
  var stamp = document.getElementById('updated');

  function schedule() {
    window.setTimeout(tick, secs * 1000);
  }

  function say(text) {
    if (stamp) {
      stamp.textContent = text;
    }
  }

  function tick() {
    if (document.hidden) {
      schedule();
      return;
    }
    var u = new URL(window.location.href);
    u.searchParams.set('partial', '1');
    fetch(u.toString(), { credentials: 'same-origin', redirect: 'manual', headers: { Accept: 'text/html' } })
      .then(function (r) {
        if (r.type === 'opaqueredirect' || r.status === 401) {
          throw new Error('logged out: reload to log in');
        }
        if (!r.ok) {
          throw new Error('HTTP ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        say('updated ' + new Date().toLocaleTimeString());
      })
      .catch(function (err) {
        say('refresh failed (' + err.message + ')');
      })
      .then(schedule);
  }

  schedule();
})();
