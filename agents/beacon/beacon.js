/* millrace beacon tracker. Include with
 *   <script src="https://BEACON/beacon.js" async></script>
 * Options, as attributes of that script tag:
 *   data-endpoint="https://BEACON"  where events go (default: the script's origin)
 *   data-flush-interval="5000"      ms between queue flushes; 0 flushes only when
 *                                   20 events wait, on millrace.flush() and on page hide
 *   data-auto-pageview="false"      do not send a page view on load
 *   data-dnt="true"                 honour the browser's Do Not Track setting
 * Sends a page view on load, queues clicks on links and on elements marked
 * data-track (their data-* attributes become properties) and custom events
 * (millrace.track(type, properties)). Opt out with millrace.optOut() (stored
 * as localStorage['millrace:optout'] = '1').
 *
 * Every event gets its id (a UUIDv7) when it is created, and keeps it: the
 * queue is kept in localStorage ('millrace:queue', at most MAX_STORED_EVENTS
 * events and MAX_STORED_CHARS characters, the oldest dropped first and
 * reported in a 'millrace_queue_overflow' event), and an event leaves it only
 * when the beacon answered 2xx (or refused the request for good: any other
 * 4xx but 408 and 429). A 408, 429, 5xx, network error or timeout is retried
 * with backoff, with the same ids. When the page is hidden the queue goes out
 * with navigator.sendBeacon, which gives no answer, so it stays queued and the
 * next page load sends it again: the sink drops the repeats by event_id. */
(function (w, d) {
  'use strict';
  // Ids need a strong random source; browsers without one (or without
  // fetch) are not tracked rather than tracked with ids that may collide.
  if ((w.millrace && w.millrace.loaded) || !w.fetch || !(w.crypto && w.crypto.getRandomValues)) {
    return;
  }
  var HONOR_DNT = /*MILLRACE_DNT*/false;
  var SESSION_IDLE_MS = 30 * 60 * 1000;
  var QUEUE_KEY = 'millrace:queue';
  var DROPPED_KEY = 'millrace:dropped';
  // localStorage holds about 5 MB per site, shared with the site's own use.
  var MAX_STORED_EVENTS = 500;
  var MAX_STORED_CHARS = 500000;
  var FLUSH_AT = 20;
  var MAX_CHUNK_EVENTS = 50;
  var MAX_CHUNK_CHARS = 20000; // sendBeacon refuses more than 64 KiB: 3 bytes a character at worst
  var TIMEOUT_MS = 15000; // longer than the beacon's ack_timeout (10 s)
  var RETRY_MIN_MS = 1000;
  var RETRY_MAX_MS = 60000;

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
  var sending = false; // a flush request is in flight
  var retryTimer = null; // set while waiting to retry
  var failures = 0; // failed flushes in a row
  var chunkLimit = MAX_CHUNK_EVENTS; // halved by a 413
  var beaconed = {}; // ids sent with sendBeacon by this page

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
    } catch (e) {
      // Storage disabled or full: keep it for this page only, and remove
      // the stale stored copy so that load reads this one.
      try {
        w.localStorage.removeItem(key);
      } catch (e2) { /* storage disabled */ }
    }
  }

  function optedOut() {
    if (load('millrace:optout') === '1') {
      return true;
    }
    var dnt = navigator.doNotTrack || w.doNotTrack || navigator.msDoNotTrack;
    return honorDNT && (dnt === '1' || dnt === 'yes');
  }

  // uuid7 is an RFC 9562 version 7 UUID: 48 bits of epoch milliseconds, the
  // version, 12 random bits, the variant, 62 random bits.
  function uuid7() {
    var b = new Uint8Array(16);
    var i;
    w.crypto.getRandomValues(b);
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

  // The queue is read and written whole, within one task, so that tabs of
  // the same site sharing it see each other's changes.
  function stored() {
    try {
      var q = JSON.parse(load(QUEUE_KEY) || '[]');
      return Array.isArray(q) ? q : [];
    } catch (e) {
      return [];
    }
  }

  function enqueue(ev) {
    var q = stored();
    q.push(ev);
    var dropped = 0;
    var text = JSON.stringify(q);
    while (q.length > MAX_STORED_EVENTS || (q.length > 1 && text.length > MAX_STORED_CHARS)) {
      q.shift();
      dropped++;
      text = JSON.stringify(q);
    }
    save(QUEUE_KEY, text);
    if (dropped > 0) {
      save(DROPPED_KEY, String((Number(load(DROPPED_KEY)) || 0) + dropped));
    }
    return q.length;
  }

  // settle removes the events of a request the beacon answered for good.
  function settle(chunk) {
    var done = {};
    for (var i = 0; i < chunk.length; i++) {
      done[chunk[i].event_id] = true;
    }
    var q = stored().filter(function (ev) { return !done[ev.event_id]; });
    save(QUEUE_KEY, JSON.stringify(q));
    // Events the queue dropped are reported once the beacon is reachable.
    var dropped = Number(load(DROPPED_KEY)) || 0;
    if (dropped > 0) {
      save(DROPPED_KEY, '0');
      q.push(event('millrace_queue_overflow', { dropped: dropped }));
      save(QUEUE_KEY, JSON.stringify(q));
    }
    return q.length;
  }

  // chunks splits events into requests the beacon and sendBeacon accept.
  function chunks(events, limit) {
    var out = [];
    var chunk = [];
    var chars = 2;
    for (var i = 0; i < events.length; i++) {
      var size = JSON.stringify(events[i]).length + 1;
      if (chunk.length > 0 && (chunk.length >= limit || chars + size > MAX_CHUNK_CHARS)) {
        out.push(chunk);
        chunk = [];
        chars = 2;
      }
      chunk.push(events[i]);
      chars += size;
    }
    if (chunk.length > 0) {
      out.push(chunk);
    }
    return out;
  }

  // flush sends the oldest queued events, one request at a time, and goes
  // on until the queue is empty or a request fails.
  function flush() {
    if (sending || retryTimer !== null) {
      return;
    }
    var chunk = chunks(stored(), chunkLimit)[0];
    if (!chunk) {
      return;
    }
    sending = true;
    var ctl = w.AbortController ? new w.AbortController() : null;
    var timer = w.setTimeout(function () { if (ctl) { ctl.abort(); } }, TIMEOUT_MS);
    w.fetch(eventsURL, {
      method: 'POST', body: JSON.stringify(chunk), credentials: 'omit', mode: 'cors',
      // text/plain needs no CORS preflight.
      headers: { 'Content-Type': 'text/plain;charset=UTF-8' },
      signal: ctl ? ctl.signal : undefined
    }).then(function (resp) {
      answered(chunk, resp.status, Number(resp.headers.get('Retry-After')) || 0);
    }, function () {
      answered(chunk, 0, 0); // network error, timeout or a refused CORS read
    });
    function answered(chunk, status, retryAfter) {
      w.clearTimeout(timer);
      sending = false;
      if (status === 413 && chunk.length > 1) {
        chunkLimit = Math.ceil(chunk.length / 2);
        flush();
        return;
      }
      // Any other 4xx but 408 and 429 is the beacon's final word (a
      // malformed or refused request, every event dead-lettered): sending
      // it again would get the same answer.
      if ((status >= 200 && status < 300) || (status >= 400 && status < 500 && status !== 408 && status !== 429)) {
        failures = 0;
        if (settle(chunk) > 0) {
          flush();
        }
        return;
      }
      // 408, 429, 5xx or no answer: the events may or may not have landed;
      // they are sent again, with the same ids, after a jittered backoff.
      failures++;
      var delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * Math.pow(2, failures - 1));
      delay = Math.max(delay / 2 + Math.random() * delay / 2, retryAfter * 1000);
      retryTimer = w.setTimeout(function () {
        retryTimer = null;
        flush();
      }, delay);
    }
  }

  // hide hands the queue to sendBeacon as the page may be going away. The
  // events stay queued: sendBeacon says only that the browser took them.
  function hide() {
    var fresh = stored().filter(function (ev) { return !beaconed[ev.event_id]; });
    var cs = chunks(fresh, MAX_CHUNK_EVENTS);
    for (var i = 0; i < cs.length; i++) {
      var body = JSON.stringify(cs[i]);
      try {
        // A string body goes out as text/plain: no CORS preflight.
        if (!navigator.sendBeacon || !navigator.sendBeacon(eventsURL, body)) {
          return; // over the browser's quota: the next page load sends the rest
        }
      } catch (e) {
        return;
      }
      for (var j = 0; j < cs[i].length; j++) {
        beaconed[cs[i][j].event_id] = true;
      }
    }
  }

  function track(type, properties, now) {
    if (optedOut() || !type) {
      return;
    }
    if (enqueue(event(String(type), properties)) >= FLUSH_AT || now) {
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
  w.addEventListener('pagehide', hide);
  d.addEventListener('visibilitychange', function () {
    if (d.visibilityState === 'hidden') {
      hide();
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
    optOut: function () { save('millrace:optout', '1'); save(QUEUE_KEY, '[]'); },
    optIn: function () { save('millrace:optout', '0'); },
    flush: flush
  };

  if (ds.autoPageview !== 'false') {
    track('page_view', {}, true);
  }
  // Events an earlier page left queued (unanswered, or handed to sendBeacon)
  // go out again now.
  flush();
})(window, document);
