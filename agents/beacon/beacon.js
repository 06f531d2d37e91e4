/* millrace beacon tracker. Include with
 *   <script src="https://BEACON/beacon.js" async></script>
 * Options, as attributes of that script tag:
 *   data-endpoint="https://BEACON"  where events go (default: the script's origin)
 *   data-flush-interval="5000"      ms between queue flushes; 0 flushes only on page hide
 *   data-auto-pageview="false"      do not send a page view on load
 *   data-dnt="true"                 honour the browser's Do Not Track setting
 * Sends a page view on load, queues clicks on links and on elements marked
 * data-track (their data-* attributes become properties) and custom events
 * (millrace.track(type, properties)), and flushes the queue with
 * navigator.sendBeacon on pagehide or when the page is hidden (fetch with
 * keepalive when sendBeacon is missing or refuses). Opt out with
 * millrace.optOut() (stored as localStorage['millrace:optout'] = '1'). */
(function (w, d) {
  'use strict';
  if (w.millrace && w.millrace.loaded) {
    return;
  }
  var HONOR_DNT = /*MILLRACE_DNT*/false;
  var SESSION_IDLE_MS = 30 * 60 * 1000;
  var MAX_QUEUE = 20;
  var MAX_CHUNK_EVENTS = 50;
  var MAX_CHUNK_CHARS = 60000; // sendBeacon refuses more than 64 KiB in flight

  var script = d.currentScript;
  if (!script) {
    var found = d.querySelectorAll('script[src*="beacon.js"]');
    script = found[found.length - 1];
  }
  var ds = (script && script.dataset) || {};
  var base = ds.endpoint || (script && script.src ? new URL(script.src, location.href).origin : location.origin);
  var eventsURL = base.replace(/\/+$/, '') + '/v1/events';
  var flushMs = ds.flushInterval !== undefined ? Number(ds.flushInterval) : 5000;
  var honorDNT = HONOR_DNT || ds.dnt === 'true';
  var memory = {};
  var queue = [];

  function load(key) {
    try {
      var v = w.localStorage.getItem(key);
      return v === null ? memory[key] : v;
    } catch (e) {
      return memory[key];
    }
  }

  function save(key, value) {
    memory[key] = value;
    try {
      w.localStorage.setItem(key, value);
    } catch (e) { /* storage disabled: keep it for this page only */ }
  }

  function optedOut() {
    if (load('millrace:optout') === '1') {
      return true;
    }
    var dnt = navigator.doNotTrack || w.doNotTrack || navigator.msDoNotTrack;
    return honorDNT && (dnt === '1' || dnt === 'yes');
  }

  // uuid7 is an RFC 9562 version 7 UUID: 48 bits of epoch milliseconds, then
  // random bits; the server keeps it as the event_id so a resent event can be
  // deduplicated.
  function uuid7() {
    var b = new Uint8Array(16);
    var i;
    if (w.crypto && w.crypto.getRandomValues) {
      w.crypto.getRandomValues(b);
    } else {
      for (i = 0; i < 16; i++) {
        b[i] = Math.floor(Math.random() * 256);
      }
    }
    var t = Date.now();
    for (i = 5; i >= 0; i--) {
      b[i] = t % 256;
      t = Math.floor(t / 256);
    }
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = '';
    for (i = 0; i < 16; i++) {
      h += (b[i] + 0x100).toString(16).slice(1);
    }
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }

  function anonymousId() {
    var id = load('millrace:aid');
    if (!id) {
      id = uuid7();
      save('millrace:aid', id);
    }
    return id;
  }

  // sessionId is renewed after 30 minutes without an event.
  function sessionId() {
    var now = Date.now();
    var s = null;
    try {
      s = JSON.parse(load('millrace:session') || 'null');
    } catch (e) { /* corrupt: start a new session */ }
    if (!s || !s.id || now - s.last > SESSION_IDLE_MS) {
      s = { id: uuid7(), last: now };
    }
    s.last = now;
    save('millrace:session', JSON.stringify(s));
    return s.id;
  }

  function event(type, properties) {
    return {
      event_id: uuid7(),
      type: type,
      url: location.href,
      referrer: d.referrer || '',
      title: d.title,
      anonymous_id: anonymousId(),
      user_id: load('millrace:uid') || undefined,
      session_id: sessionId(),
      ts: Date.now(),
      properties: properties || {}
    };
  }

  function send(events) {
    var body = JSON.stringify(events.length === 1 ? events[0] : events);
    var sent = false;
    if (navigator.sendBeacon) {
      try {
        // A string body goes out as text/plain: no CORS preflight.
        sent = navigator.sendBeacon(eventsURL, body);
      } catch (e) { /* fall back to fetch */ }
    }
    if (!sent && w.fetch) {
      try {
        w.fetch(eventsURL, {
          method: 'POST', body: body, keepalive: true, credentials: 'omit', mode: 'cors',
          headers: { 'Content-Type': 'text/plain;charset=UTF-8' }
        })['catch'](function () { /* lost: the page is going away */ });
        sent = true;
      } catch (e) { /* nothing more to try */ }
    }
    return sent;
  }

  function flush() {
    while (queue.length > 0) {
      var chunk = [];
      var chars = 2;
      while (queue.length > 0 && chunk.length < MAX_CHUNK_EVENTS) {
        var size = JSON.stringify(queue[0]).length + 1;
        if (chunk.length > 0 && chars + size > MAX_CHUNK_CHARS) {
          break;
        }
        chars += size;
        chunk.push(queue.shift());
      }
      send(chunk);
    }
  }

  function track(type, properties, now) {
    if (optedOut() || !type) {
      return;
    }
    queue.push(event(String(type), properties));
    if (now || queue.length >= MAX_QUEUE) {
      flush();
    }
  }

  function dataProperties(el, into) {
    for (var i = 0; i < el.attributes.length; i++) {
      var a = el.attributes[i];
      if (a.name.indexOf('data-') === 0) {
        into[a.name.slice(5).replace(/-([a-z])/g, function (_, c) { return c.toUpperCase(); })] = a.value;
      }
    }
    return into;
  }

  function onClick(e) {
    var target = e.target;
    if (!target || !target.closest) {
      return;
    }
    var el = target.closest('[data-track]') || target.closest('a[href]');
    if (!el) {
      return;
    }
    var props = dataProperties(el, {});
    props.tag = el.tagName.toLowerCase();
    if (el.id) {
      props.id = el.id;
    }
    var text = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim();
    if (text) {
      props.text = text.slice(0, 200);
    }
    if (el.href) {
      props.href = el.href;
    }
    track('click', props);
  }

  d.addEventListener('click', onClick, true);
  // pagehide is the last event a page reliably gets (unload is not fired on
  // mobile or with the back/forward cache); a hidden page may never come back.
  w.addEventListener('pagehide', flush);
  d.addEventListener('visibilitychange', function () {
    if (d.visibilityState === 'hidden') {
      flush();
    }
  });
  if (flushMs > 0) {
    w.setInterval(flush, flushMs);
  }

  w.millrace = {
    loaded: true,
    track: function (type, properties) { track(type, properties); },
    page: function (properties) { track('page_view', properties, true); },
    identify: function (userId) { save('millrace:uid', userId ? String(userId) : ''); },
    optOut: function () { save('millrace:optout', '1'); queue = []; },
    optIn: function () { save('millrace:optout', '0'); },
    flush: flush
  };

  if (ds.autoPageview !== 'false') {
    track('page_view', {}, true);
  }
})(window, document);
