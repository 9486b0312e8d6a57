/* socialgym viewer: replays one run directory. Hand-written; no library, no network.
 * Every text from the run's files goes in with textContent (never innerHTML). */
(function () {
  'use strict';

  var DATA = JSON.parse(document.getElementById('sg-data').textContent);
  var PALETTE = ['#4c72b0', '#dd8452', '#55a868', '#c44e52', '#8172b3', '#937860', '#da8bc3', '#8c8c8c',
                 '#ccb974', '#64b5cd'];
  var PAGE = 500;           // timeline items rendered at once ("show more" adds as many)
  var BIG_GRAPH = 300;      // above this many agents the graph draws at most MAX_EDGES edges
  var MAX_EDGES = 2000;
  var TOP_TIES = 10;        // strongest ties in and out shown on an agent's page

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function data(e, obj) {
    for (var k in obj) if (Object.prototype.hasOwnProperty.call(obj, k)) e.setAttribute('data-' + k, String(obj[k]));
    return e;
  }
  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return 'n/a';
    return Number(x).toFixed(digits === undefined ? 3 : digits);
  }
  /* Python's repr of a float (shortest round-trip digits, Python's exponent style):
     what float(np.float32(w)) or a value of events.jsonl prints as in Python. */
  function pyFloat(x) {
    if (Number.isNaN(x)) return 'nan';
    if (x === Infinity) return 'inf';
    if (x === -Infinity) return '-inf';
    if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
    var ax = Math.abs(x);
    if (ax >= 1e-4 && ax < 1e16) {
      var s = String(x);
      if (s.indexOf('.') < 0 && s.indexOf('e') < 0) s += '.0';
      return s;
    }
    var parts = x.toExponential().split('e');
    var sign = parts[1].charAt(0) === '-' ? '-' : '+';
    var digits = parts[1].replace(/^[+-]/, '');
    if (digits.length < 2) digits = '0' + digits;
    return parts[0] + 'e' + sign + digits;
  }

  /* ----------------------------------------------------------------- binary columns */
  var LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  function decode(col) {
    var bin = atob(col.b64);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var kind = col.dtype;
    if (kind === '|i1') return new Int8Array(bytes.buffer);
    if (kind === '|u1') return new Uint8Array(bytes.buffer);
    if (LITTLE) {
      if (kind === '<i2') return new Int16Array(bytes.buffer);
      if (kind === '<i4') return new Int32Array(bytes.buffer);
      if (kind === '<f4') return new Float32Array(bytes.buffer);
      if (kind === '<f8') return new Float64Array(bytes.buffer);
    }
    var view = new DataView(bytes.buffer), size = +kind.slice(2), count = bytes.length / size, out, get;
    if (kind === '<i2') { out = new Int16Array(count); get = function (j) { return view.getInt16(j * 2, true); }; }
    else if (kind === '<i4') { out = new Int32Array(count); get = function (j) { return view.getInt32(j * 4, true); }; }
    else if (kind === '<f4') { out = new Float32Array(count); get = function (j) { return view.getFloat32(j * 4, true); }; }
    else { out = new Float64Array(count); get = function (j) { return view.getFloat64(j * 8, true); }; }
    for (var j = 0; j < count; j++) out[j] = get(j);
    return out;
  }
  function table(t, names) {
    var out = {n: t.n};
    names.forEach(function (k) { out[k] = t[k] ? decode(t[k]) : new Int32Array(0); });
    return out;
  }

  /* ----------------------------------------------------------------- notices (both kinds) */
  function showNotices() {
    var box = $('notices');
    (DATA.notices || []).forEach(function (text) { box.appendChild(el('li', 'notice', text)); });
    box.hidden = !(DATA.notices || []).length;
  }

  if (DATA.kind === 'discussion') {
    showNotices();
    initDiscussions();
    return;
  }

  /* ================================================================= feed run */
  var AGENTS = DATA.agents, N = AGENTS.length, T = DATA.T;
  var AGENT_INDEX = {};
  AGENTS.forEach(function (a, i) { AGENT_INDEX[a] = i; });
  var GROUPS = DATA.groups;
  var GROUP_NAMES = DATA.group_names;
  var groupColour = {};
  GROUP_NAMES.forEach(function (g, k) { groupColour[g] = PALETTE[k % PALETTE.length]; });
  function colourOf(i) { return groupColour[GROUPS[i]] || PALETTE[0]; }

  var IT = table(DATA.items, ['id', 'round', 'kind', 'author', 'recipient', 'target', 'topic', 'sentiment',
                             'mention_row', 'mention_agent']);
  var TEXTS = DATA.items.text, KINDS = DATA.items.kinds, TOPICS = DATA.topics;
  var VO = table(DATA.votes, ['round', 'voter', 'item', 'author', 'value']);
  var TE = table(DATA.tie_events, ['round', 'src', 'dst', 'before', 'after', 'evidence']);
  var REW = decode(DATA.rewards.values), REW_COLS = DATA.rewards.columns;
  var CNT = decode(DATA.counts.values), CNT_COLS = DATA.counts.columns;

  // indexes, built once
  var rowOfId = new Map(), rowsByRound = [], rowsByAuthor = [], mentionsOf = new Map();
  var commentsOn = new Map();      // target id -> comment rows
  for (var r0 = 0; r0 <= T; r0++) rowsByRound.push([]);
  for (var a0 = 0; a0 < N; a0++) rowsByAuthor.push([]);
  for (var k = 0; k < IT.n; k++) {
    rowOfId.set(IT.id[k], k);
    if (IT.round[k] >= 1 && IT.round[k] <= T) rowsByRound[IT.round[k]].push(k);
    if (IT.author[k] >= 0 && IT.author[k] < N) rowsByAuthor[IT.author[k]].push(k);
    if (KINDS[IT.kind[k]] === 'COM' && IT.target[k] >= 0) {
      if (!commentsOn.has(IT.target[k])) commentsOn.set(IT.target[k], []);
      commentsOn.get(IT.target[k]).push(k);
    }
  }
  for (var m = 0; m < IT.mention_row.length; m++) {
    var row = IT.mention_row[m];
    if (!mentionsOf.has(row)) mentionsOf.set(row, []);
    mentionsOf.get(row).push(IT.mention_agent[m]);
  }
  var votesOnItem = new Map(), votesByVoter = [];
  for (var a1 = 0; a1 < N; a1++) votesByVoter.push([]);
  for (var v = 0; v < VO.n; v++) {
    if (!votesOnItem.has(VO.item[v])) votesOnItem.set(VO.item[v], []);
    votesOnItem.get(VO.item[v]).push(v);
    if (VO.voter[v] >= 0 && VO.voter[v] < N) votesByVoter[VO.voter[v]].push(v);
  }
  var tieEventsOf = new Map();     // src * N + dst -> rows
  for (var t0 = 0; t0 < TE.n; t0++) {
    var key = TE.src[t0] * N + TE.dst[t0];
    if (!tieEventsOf.has(key)) tieEventsOf.set(key, []);
    tieEventsOf.get(key).push(t0);
  }
  var transcripts = (DATA.transcripts && DATA.transcripts.entries) || {};
  var LINES = (DATA.transcripts && DATA.transcripts.lines) || [];
  function lines(ids) { return ids.map(function (k) { return LINES[k]; }).join('\n'); }
  var tieCache = {};
  function ties(round) {          // W after `round` as CSR typed arrays, or null
    if (tieCache[round] !== undefined) return tieCache[round];
    var e = DATA.ties.rounds[String(round)];
    tieCache[round] = e ? {indptr: decode(e.indptr), indices: decode(e.indices), data: decode(e.data)} : null;
    return tieCache[round];
  }
  function reward(round, agent, col) { return REW[((round - 1) * N + agent) * REW_COLS.length + col]; }
  function count(round, agent, col) { return CNT[((round - 1) * N + agent) * CNT_COLS.length + col]; }
  function likes(id, upto) {
    var up = 0, down = 0, rows = votesOnItem.get(id) || [];
    for (var i = 0; i < rows.length; i++) {
      if (VO.round[rows[i]] > upto) continue;
      if (VO.value[rows[i]] > 0) up++; else if (VO.value[rows[i]] < 0) down++;
    }
    return [up, down];
  }
  function name(i) { return i >= 0 && i < N ? AGENTS[i] : '(unknown)'; }
  function topicOf(row) { return IT.topic[row] >= 0 ? TOPICS[IT.topic[row]] : ''; }
  function agentSpan(i, cls) { return data(el('span', cls || 'author', name(i)), {agent: name(i)}); }

  /* ----------------------------------------------------------------- state */
  var state = {round: 1, agent: null, theta: DATA.theta, limit: PAGE, dmLimit: PAGE};
  var slider = $('round'), thetaInput = $('theta');

  /* ----------------------------------------------------------------- header, filters, agents */
  function initStatic() {
    var meta = [];
    meta.push(N + ' agents');
    meta.push((DATA.rounds_shown || 0) + ' rounds on disk' + (DATA.max_rounds ? ' (of ' + DATA.max_rounds + ' planned)' : ''));
    if (DATA.status) meta.push('status ' + DATA.status);
    if (DATA.seed !== null && DATA.seed !== undefined) meta.push('seed ' + DATA.seed);
    var cond = DATA.condition || {};
    var ck = Object.keys(cond);
    if (ck.length) meta.push(ck.map(function (k) { return k + ' = ' + JSON.stringify(cond[k]); }).join('; '));
    if (DATA.llm) meta.push('LLM requests ' + DATA.llm.requests + ', fallbacks ' + DATA.llm.fallbacks);
    $('run-meta').textContent = meta.join(' · ') + ' · ' + DATA.path;
    if (DATA.config_text) $('config-text').textContent = DATA.config_text; else $('config').hidden = true;

    var fa = $('filter-agent');
    AGENTS.forEach(function (a) { var o = el('option', null, a); o.value = a; fa.appendChild(o); });
    var ft = $('filter-topic');
    TOPICS.forEach(function (t) { var o = el('option', null, t); o.value = t; ft.appendChild(o); });
    var fg = $('filter-group');
    GROUP_NAMES.forEach(function (g) { var o = el('option', null, g || '(no group)'); o.value = g; fg.appendChild(o); });
    if (GROUP_NAMES.length <= 1) fg.parentNode.title = 'this run has a single group';

    var list = $('agents');
    var persona = DATA.personas || {};
    AGENTS.forEach(function (a, i) {
      var li = el('li');
      var b = data(el('button', 'agent-link'), {agent: a});
      b.type = 'button';
      var dot = el('span', 'dot');
      dot.style.background = colourOf(i);
      b.appendChild(dot);
      var label = a + (persona[a] && persona[a].name ? ' · ' + persona[a].name : '') + (GROUPS[i] ? ' (' + GROUPS[i] + ')' : '');
      b.appendChild(el('span', 'agent-name', label));
      b.appendChild(el('span', 'agent-total'));
      b.title = 'total reward at the current round (click for the agent page)';
      li.appendChild(b);
      list.appendChild(li);
    });

    var legend = $('legend');
    if (GROUP_NAMES.length > 1 || (GROUP_NAMES.length === 1 && GROUP_NAMES[0])) {
      GROUP_NAMES.forEach(function (g) {
        var li = el('li');
        var dot = el('span', 'dot');
        dot.style.background = groupColour[g];
        li.appendChild(dot);
        li.appendChild(el('span', null, ' ' + (g || '(no group)')));
        legend.appendChild(li);
      });
    }
    initGraph();
  }

  /* ----------------------------------------------------------------- timeline */
  function filters() {
    return {agent: $('filter-agent').value, topic: $('filter-topic').value, group: $('filter-group').value,
            kind: $('filter-kind').value, search: $('search').value.trim().toLowerCase()};
  }
  function passes(row, f) {
    if (f.agent && name(IT.author[row]) !== f.agent) return false;
    if (f.topic && topicOf(row) !== f.topic) return false;
    if (f.group && GROUPS[IT.author[row]] !== f.group) return false;
    if (f.kind && KINDS[IT.kind[row]] !== f.kind) return false;
    if (f.search && TEXTS[row].toLowerCase().indexOf(f.search) < 0) return false;
    return true;
  }
  function itemMeta(row, opts) {
    var meta = el('div', 'meta');
    meta.appendChild(agentSpan(IT.author[row]));
    if (GROUPS[IT.author[row]]) meta.appendChild(el('span', 'badge', GROUPS[IT.author[row]]));
    if (opts && opts.to !== undefined) {
      meta.appendChild(el('span', null, '→'));
      meta.appendChild(agentSpan(opts.to, 'author recipient'));
    }
    var topic = topicOf(row);
    if (topic) meta.appendChild(el('span', 'topic', topic));
    meta.appendChild(el('span', 'item-id', KINDS[IT.kind[row]] + ' #' + IT.id[row]));
    if (opts && opts.reply) meta.appendChild(el('span', 'muted', opts.reply));
    (mentionsOf.get(row) || []).forEach(function (i) {
      var s = agentSpan(i, 'mention');
      s.textContent = '@' + name(i);
      meta.appendChild(s);
    });
    return meta;
  }
  function textDiv(row) {
    var d = el('div', 'text', TEXTS[row]);
    if (!TEXTS[row]) d.classList.add('empty');
    return d;
  }
  function statsDiv(row, upto, public_) {
    var s = el('div', 'stats');
    if (public_) {
      var lk = likes(IT.id[row], upto);
      s.appendChild(data(el('span', 'likes', lk[0]), {value: lk[0]}));
      s.appendChild(data(el('span', 'dislikes', lk[1]), {value: lk[1]}));
    }
    var sent = IT.sentiment[row];
    s.appendChild(data(el('span', 'sentiment', Number.isNaN(sent) ? 'n/a' : pyFloat(sent)),
                       {value: Number.isNaN(sent) ? '' : pyFloat(sent)}));
    return s;
  }
  function postDiv(row, t) {
    var d = data(el('div', 'post'), {id: IT.id[row], author: name(IT.author[row]), topic: topicOf(row),
                                     round: IT.round[row]});
    d.appendChild(itemMeta(row));
    d.appendChild(textDiv(row));
    d.appendChild(statsDiv(row, t, true));
    var replies = (commentsOn.get(IT.id[row]) || []);
    var now = replies.filter(function (c) { return IT.round[c] <= t; });
    if (now.length) {
      var box = el('div', 'comments');
      now.forEach(function (c) { box.appendChild(commentDiv(c, t)); });
      d.appendChild(box);
    }
    var later = replies.length - now.length;
    if (later) d.appendChild(el('div', 'later-replies', later + ' comment' + (later === 1 ? '' : 's') + ' in later rounds'));
    return d;
  }
  function commentDiv(row, t) {
    var d = data(el('div', 'comment'), {id: IT.id[row], author: name(IT.author[row]), topic: topicOf(row),
                                        round: IT.round[row], target: IT.target[row]});
    d.appendChild(itemMeta(row));
    d.appendChild(textDiv(row));
    d.appendChild(statsDiv(row, t, true));
    return d;
  }
  function dmDiv(row) {
    var d = data(el('div', 'dm'), {id: IT.id[row], author: name(IT.author[row]), recipient: name(IT.recipient[row]),
                                   round: IT.round[row], topic: topicOf(row)});
    d.appendChild(itemMeta(row, {to: IT.recipient[row], reply: IT.target[row] >= 0 ? 'reply to DM #' + IT.target[row] : ''}));
    d.appendChild(textDiv(row));
    d.appendChild(statsDiv(row, IT.round[row], false));
    return d;
  }
  function parentDiv(id) {
    var d = data(el('div', 'parent'), {id: id});
    var prow = rowOfId.get(id);
    if (prow === undefined) {
      d.appendChild(el('span', 'muted', 'on item #' + id + ' (not in events.jsonl)'));
      return d;
    }
    data(d, {author: name(IT.author[prow]), round: IT.round[prow], kind: KINDS[IT.kind[prow]]});
    var meta = el('div', 'meta');
    meta.appendChild(el('span', null, 'on ' + KINDS[IT.kind[prow]] + ' #' + id + ' by'));
    meta.appendChild(agentSpan(IT.author[prow]));
    meta.appendChild(el('span', null, '(round ' + IT.round[prow] + ')'));
    if (topicOf(prow)) meta.appendChild(el('span', 'topic', topicOf(prow)));
    d.appendChild(meta);
    d.appendChild(textDiv(prow));
    return d;
  }

  function renderTimeline() {
    var t = state.round, f = filters();
    var box = $('timeline'), more = $('timeline-more'), dms = $('dms');
    box.textContent = '';
    more.textContent = '';
    dms.textContent = '';
    var rows = rowsByRound[t] || [];
    var posts = [], threads = new Map(), dmRows = [], counts = {POST: 0, COM: 0, DM: 0};
    rows.forEach(function (row) {
      var kind = KINDS[IT.kind[row]];
      counts[kind]++;
      if (!passes(row, f)) return;
      if (kind === 'POST') posts.push(row);
      else if (kind === 'COM') {
        if (!threads.has(IT.target[row])) threads.set(IT.target[row], []);
        threads.get(IT.target[row]).push(row);
      } else dmRows.push(row);
    });
    var nVotes = 0, nTies = 0;
    for (var v = 0; v < VO.n; v++) if (VO.round[v] === t) nVotes++;
    for (var k = 0; k < TE.n; k++) if (TE.round[k] === t) nTies++;
    $('round-summary').textContent = '— round ' + t + ': ' + counts.POST + ' posts, ' + counts.COM + ' comments, ' +
      counts.DM + ' DMs, ' + nVotes + ' votes, ' + nTies + ' tie updates';
    if (!DATA.has_events) {
      box.appendChild(el('p', 'empty-note', 'No events.jsonl: the texts of this run were not logged.'));
    }
    var shown = 0, total = posts.length;
    threads.forEach(function (c) { total += c.length; });
    posts.sort(function (a, b) { return IT.id[a] - IT.id[b]; });
    for (var i = 0; i < posts.length && shown < state.limit; i++, shown++) box.appendChild(postDiv(posts[i], t));
    var targets = Array.from(threads.keys()).sort(function (a, b) { return a - b; });
    for (var j = 0; j < targets.length && shown < state.limit; j++) {
      var th = data(el('div', 'thread'), {target: targets[j]});
      th.appendChild(parentDiv(targets[j]));
      var cs = threads.get(targets[j]);
      for (var c = 0; c < cs.length && shown < state.limit; c++, shown++) th.appendChild(commentDiv(cs[c], t));
      box.appendChild(th);
    }
    if (DATA.has_events && !total) {
      box.appendChild(el('p', 'empty-note', f.kind === 'DM' ? 'DMs are listed below (tick "show DMs").' :
        'No post or comment of round ' + t + ' matches.'));
    }
    if (shown < total) {
      more.appendChild(el('span', 'muted', 'showing ' + shown + ' of ' + total + ' items of this round '));
      var b = el('button', 'more', 'show ' + Math.min(PAGE, total - shown) + ' more');
      b.id = 'show-more';
      b.type = 'button';
      b.addEventListener('click', function () { state.limit += PAGE; renderTimeline(); });
      more.appendChild(b);
    }
    // DMs (hidden unless the toggle is on)
    $('dm-count').textContent = '(' + counts.DM + ' this round' + (dmRows.length !== counts.DM ? ', ' + dmRows.length + ' match' : '') + ')';
    dms.hidden = !$('dm-toggle').checked;
    dmRows.sort(function (a, b) { return IT.id[a] - IT.id[b]; });
    for (var d = 0; d < dmRows.length && d < state.dmLimit; d++) dms.appendChild(dmDiv(dmRows[d]));
    if (dmRows.length > state.dmLimit) {
      var bm = el('button', 'more', 'show more DMs');
      bm.type = 'button';
      bm.addEventListener('click', function () { state.dmLimit += PAGE; renderTimeline(); });
      dms.appendChild(bm);
    }
    if (!dmRows.length) dms.appendChild(el('p', 'empty-note', 'No DM of round ' + t + ' matches.'));
  }

  /* ----------------------------------------------------------------- tie graph */
  var SVGNS = $('graph').namespaceURI;
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  var edgeLayer, nodeLayer, nodes = [];
  function initGraph() {
    var g = $('graph');
    edgeLayer = svg('g', {id: 'edges'});
    nodeLayer = svg('g', {id: 'nodes'});
    g.appendChild(edgeLayer);
    g.appendChild(nodeLayer);
    var X = DATA.layout.x, Y = DATA.layout.y;
    var radius = N <= 40 ? 24 : N <= BIG_GRAPH ? 10 : 5;
    for (var i = 0; i < N; i++) {
      var c = svg('circle', {cx: X[i], cy: Y[i], r: radius, fill: colourOf(i), 'data-agent': AGENTS[i]});
      var title = svg('title', {});
      title.textContent = AGENTS[i] + (GROUPS[i] ? ' (' + GROUPS[i] + ')' : '');
      c.appendChild(title);
      nodeLayer.appendChild(c);
      nodes.push(c);
      if (N <= 40) {
        var label = svg('text', {x: X[i], y: Y[i]});
        label.textContent = String(i);
        nodeLayer.appendChild(label);
      }
    }
  }
  /* W_ud = (W + W^T)/2 of round t, one entry per unordered pair with a non-zero weight:
     the float32 sum halved, i.e. float32((W + W^T)/2) as numpy computes it on the .npz. */
  function undirected(t) {
    var W = ties(t);
    if (!W) return null;
    var pairs = new Map();
    for (var i = 0; i < N; i++) {
      for (var p = W.indptr[i]; p < W.indptr[i + 1]; p++) {
        var j = W.indices[p];
        if (i === j) continue;
        var key = i < j ? i * N + j : j * N + i;
        pairs.set(key, (pairs.get(key) || 0) + W.data[p]);
      }
    }
    var out = [];
    pairs.forEach(function (sum, key) {
      var w = Math.fround(sum) / 2;
      if (w > 0) out.push([Math.floor(key / N), key % N, w]);
    });
    return out;
  }
  var udCache = {};
  function renderGraph() {
    var t = state.round;
    var theta = parseFloat(thetaInput.value);
    if (!Number.isFinite(theta)) theta = DATA.theta;
    state.theta = theta;
    edgeLayer.textContent = '';
    nodes.forEach(function (c) { c.classList.toggle('selected', c.getAttribute('data-agent') === state.agent); });
    var metrics = $('graph-metrics'), note = $('graph-note');
    metrics.textContent = '';
    note.textContent = '';
    if (udCache[t] === undefined) udCache[t] = undirected(t);
    var ud = udCache[t];
    if (!ud) {
      metrics.textContent = 'No tie matrix for round ' + t + '.';
      data(metrics, {'n-edges': '', density: ''});
      return;
    }
    var kept = ud.filter(function (e) { return e[2] >= theta; });
    var E = kept.length, density = N > 1 ? 2 * E / (N * (N - 1)) : 0;
    data(metrics, {'n-edges': E, density: density, theta: theta, round: t});
    metrics.appendChild(el('span', null, 'round ' + t + ', θ = ' + theta + ': '));
    var ne = el('span', null, 'n_edges ' + E);
    ne.id = 'metric-n-edges';
    metrics.appendChild(ne);
    metrics.appendChild(el('span', null, ' · '));
    var de = el('span', null, 'density ' + density.toFixed(4));
    de.id = 'metric-density';
    metrics.appendChild(de);
    var net = DATA.network, pos = net.round.indexOf(t);
    if (pos >= 0 && Math.abs(theta - DATA.theta) < 1e-12 && net.n_edges[pos] !== null) {
      metrics.appendChild(el('span', 'muted', ' (network.csv, computed by the run: n_edges ' + net.n_edges[pos] +
        ', density ' + Number(net.density[pos]).toFixed(4) + ')'));
    }
    var drawn = kept;
    if (kept.length > MAX_EDGES) {
      drawn = kept.slice().sort(function (a, b) { return b[2] - a[2]; }).slice(0, MAX_EDGES);
      note.textContent = 'Drawing the ' + MAX_EDGES + ' strongest of ' + kept.length + ' edges with W_ud ≥ θ' +
        (N > BIG_GRAPH ? ' (more than ' + BIG_GRAPH + ' agents)' : '') + '; the metrics count all of them.';
    }
    var X = DATA.layout.x, Y = DATA.layout.y;
    var frag = document.createDocumentFragment();
    drawn.forEach(function (e) {
      var i = e[0], j = e[1], w = e[2];
      var line = svg('line', {x1: X[i], y1: Y[i], x2: X[j], y2: Y[j], 'stroke-width': (1 + 14 * w).toFixed(2),
                              'data-src': AGENTS[i], 'data-dst': AGENTS[j], 'data-w': pyFloat(w)});
      line.setAttribute('class', 'edge' + (state.agent && (AGENTS[i] === state.agent || AGENTS[j] === state.agent) ? ' incident' : ''));
      var title = svg('title', {});
      title.textContent = AGENTS[i] + ' – ' + AGENTS[j] + ': W_ud = ' + pyFloat(w);
      line.appendChild(title);
      frag.appendChild(line);
    });
    edgeLayer.appendChild(frag);
  }

  /* ----------------------------------------------------------------- agents list */
  function renderAgentTotals() {
    var t = state.round, col = REW_COLS.indexOf('total');
    var links = $('agents').querySelectorAll('.agent-link');
    for (var i = 0; i < links.length; i++) {
      var val = col >= 0 && t <= T ? reward(t, i, col) : NaN;
      links[i].querySelector('.agent-total').textContent = Number.isNaN(val) ? '' : fmt(val, 2);
      links[i].classList.toggle('selected', AGENTS[i] === state.agent);
    }
  }

  /* ----------------------------------------------------------------- agent page */
  function section(title, cls) {
    var s = el('section', cls);
    s.appendChild(el('h3', null, title));
    return s;
  }
  function note(text) { return el('p', 'empty-note', text); }
  function sparkline(values, t) {
    var w = 200, h = 40, pad = 4;
    var s = svg('svg', {viewBox: '0 0 ' + w + ' ' + h, preserveAspectRatio: 'none'});
    var finite = values.filter(function (x) { return !Number.isNaN(x); });
    if (!finite.length) return s;
    var lo = Math.min(0, Math.min.apply(null, finite)), hi = Math.max(1, Math.max.apply(null, finite));
    function px(k) { return values.length > 1 ? pad + (w - 2 * pad) * k / (values.length - 1) : w / 2; }
    function py(x) { return h - pad - (h - 2 * pad) * (x - lo) / (hi - lo || 1); }
    var pts = [];
    values.forEach(function (x, k) { if (!Number.isNaN(x)) pts.push(px(k).toFixed(1) + ',' + py(x).toFixed(1)); });
    s.appendChild(svg('polyline', {points: pts.join(' ')}));
    var x = values[t - 1];
    if (x !== undefined && !Number.isNaN(x)) s.appendChild(svg('circle', {cx: px(t - 1), cy: py(x), r: 3}));
    return s;
  }
  function entriesOf(agent, purpose) {
    return (transcripts[agent] || []).filter(function (e) { return !purpose || e[1] === purpose; });
  }
  function lastUser(entry) {
    var msgs = entry[4];
    for (var i = 0; i < msgs.length; i++) if (msgs[i][0] === 'user') return lines(msgs[i][1]);
    return '';
  }
  /* the feed an LLM agent was shown: the plan prompt lists it ("- id 21 by agent_5 [topic] ...") */
  function feedFromPrompt(text) {
    var out = [], re = /^- id (\d+) by (\S+)/;
    text.split('\n').forEach(function (line) { var m = re.exec(line); if (m) out.push([parseInt(m[1], 10), m[2], line]); });
    return out;
  }
  function voteItemsFromPrompt(text) {
    var out = [], re = /^- (\d+) (\S+?):/;
    text.split('\n').forEach(function (line) { var m = re.exec(line); if (m) out.push([parseInt(m[1], 10), m[2], line]); });
    return out;
  }
  function itemLine(id, cls, fallbackLine) {
    var d = data(el('div', cls), {id: id});
    var row = rowOfId.get(id);
    if (row === undefined) { d.textContent = fallbackLine; return d; }
    var meta = el('span', 'meta');
    meta.appendChild(el('span', 'item-id', KINDS[IT.kind[row]] + ' #' + id + ' (round ' + IT.round[row] + ')'));
    meta.appendChild(agentSpan(IT.author[row]));
    if (topicOf(row)) meta.appendChild(el('span', 'topic', topicOf(row)));
    d.appendChild(meta);
    d.appendChild(textDiv(row));
    return d;
  }
  /* what src did toward dst in a round: its DMs and comments to dst, @mentions of dst, votes on dst's items */
  function interactions(src, dst, round) {
    var out = [];
    (rowsByAuthor[src] || []).forEach(function (row) {
      if (IT.round[row] !== round) return;
      var kind = KINDS[IT.kind[row]];
      var said = TEXTS[row] ? ': ' + TEXTS[row] : '';
      if ((kind === 'DM' || kind === 'COM') && IT.recipient[row] === dst) out.push(kind + ' #' + IT.id[row] + said);
      else if ((mentionsOf.get(row) || []).indexOf(dst) >= 0) out.push('mention in ' + kind + ' #' + IT.id[row] + said);
    });
    (votesByVoter[src] || []).forEach(function (v) {
      if (VO.round[v] === round && VO.author[v] === dst) out.push((VO.value[v] > 0 ? 'like' : 'dislike') + ' on #' + VO.item[v]);
    });
    return out;
  }
  function tieList(i, t, dir) {
    var W = ties(t), box = el('div', 'tie-list');
    if (!W) { box.appendChild(note('No tie matrix for round ' + t + '.')); return box; }
    var ws = [];
    if (dir === 'out') {
      for (var p = W.indptr[i]; p < W.indptr[i + 1]; p++) if (W.indices[p] !== i && W.data[p] > 0) ws.push([W.indices[p], W.data[p]]);
    } else {
      for (var r = 0; r < N; r++) {
        for (var q = W.indptr[r]; q < W.indptr[r + 1]; q++) {
          if (W.indices[q] === i && r !== i && W.data[q] > 0) ws.push([r, W.data[q]]);
        }
      }
    }
    ws.sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
    box.appendChild(el('p', 'muted', ws.length + ' tie' + (ws.length === 1 ? '' : 's') + ' ' + (dir === 'out' ? 'out' : 'in') +
      ' with W > 0 at round ' + t + (ws.length > TOP_TIES ? '; the ' + TOP_TIES + ' strongest:' : ':')));
    ws.slice(0, TOP_TIES).forEach(function (pw) {
      var peer = pw[0], w = pw[1];
      var det = data(el('details', 'tie-' + dir), {peer: AGENTS[peer], w: pyFloat(w)});
      var sum = el('summary');
      sum.appendChild(el('span', null, dir === 'out' ? '→ ' : '← '));
      sum.appendChild(agentSpan(peer, 'peer'));
      sum.appendChild(el('span', 'tie-w', ' W = ' + pyFloat(w)));
      var src = dir === 'out' ? i : peer, dst = dir === 'out' ? peer : i;
      var evs = (tieEventsOf.get(src * N + dst) || []).filter(function (k) { return TE.round[k] <= t; });
      sum.appendChild(el('span', 'muted', ' (' + evs.length + ' update' + (evs.length === 1 ? '' : 's') + ')'));
      det.appendChild(sum);
      det.appendChild(el('div', 'muted', 'updates of W[' + AGENTS[src] + ' → ' + AGENTS[dst] + '] (events.jsonl; between them it decays):'));
      evs.forEach(function (k) {
        var e = data(el('div', 'tie-event'), {round: TE.round[k], before: pyFloat(TE.before[k]), after: pyFloat(TE.after[k]),
                                              evidence: pyFloat(TE.evidence[k])});
        e.appendChild(el('div', null, 'round ' + TE.round[k] + ': ' + pyFloat(TE.before[k]) + ' → ' + pyFloat(TE.after[k]) +
          ', evidence ' + pyFloat(TE.evidence[k])));
        interactions(src, dst, TE.round[k]).forEach(function (line) { e.appendChild(el('div', 'why', line)); });
        det.appendChild(e);
      });
      if (!evs.length) det.appendChild(note('No tie update recorded up to round ' + t + (DATA.has_events ? ' (a seed tie?)' : ' (no events.jsonl)') + '.'));
      box.appendChild(det);
    });
    return box;
  }
  function personaSection(a, i) {
    var s = section('Persona', 'persona');
    var p = (DATA.personas || {})[a];
    var dl = el('dl');
    function row(k, v) { if (v === undefined || v === null || v === '') return; dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); }
    function five(x) {
      if (!x || typeof x !== 'object') return 'not measured';
      return Object.keys(x).map(function (k) { return k + ' ' + x[k]; }).join(', ');
    }
    if (p) {
      row('name', p.name); row('role', p.role); row('description', p.description); row('stance', p.stance);
      row('style', p.style);
      if (Array.isArray(p.interests)) row('interests', p.interests.join(', '));
      row('Big Five (intended)', five(p.big_five));
      row('Big Five (measured)', p.big_five_measured ? five(p.big_five_measured) : 'not measured (no survey)');
    }
    row('group', GROUPS[i] || '(none)');
    row('policy', DATA.policies[i] || '');
    row('coached', DATA.coached[i] ? 'yes' : 'no');
    var lam = (DATA.lambdas || {})[a];
    if (lam) row('λ', Object.keys(lam.values).map(function (k) { return k + ' ' + lam.values[k]; }).join(', ') + ' (' + lam.source + ')');
    s.appendChild(dl);
    if (!p) s.appendChild(note('No persona in personas.json for this agent (scripted agents have none).'));
    return s;
  }
  function renderAgent() {
    var page = $('agent-page'), box = $('agent-content');
    var a = state.agent;
    if (!a || AGENT_INDEX[a] === undefined) {
      page.hidden = true;
      page.removeAttribute('data-agent');
      document.body.classList.remove('agent-open');
      return;
    }
    var i = AGENT_INDEX[a], t = state.round;
    var open = {};
    box.querySelectorAll('details[data-peer]').forEach(function (d) { if (d.open) open[d.className + ':' + d.getAttribute('data-peer')] = true; });
    box.textContent = '';
    page.setAttribute('data-agent', a);
    page.setAttribute('data-round', t);
    page.hidden = false;
    document.body.classList.add('agent-open');
    var h = el('h2', null, a);
    var p = (DATA.personas || {})[a];
    if (p && p.name) h.appendChild(el('span', 'muted', ' · ' + p.name));
    box.appendChild(h);
    box.appendChild(el('div', 'muted', 'at round ' + t + ' of ' + T));
    box.appendChild(personaSection(a, i));

    // rewards
    var rs = section('Rewards per round', 'rewards');
    var charts = el('div', 'charts');
    REW_COLS.forEach(function (c, ci) {
      var vals = [];
      for (var r = 1; r <= T; r++) vals.push(reward(r, i, ci));
      var d = data(el('div', 'reward-chart'), {component: c});
      var label = el('div');
      label.appendChild(el('b', null, c));
      label.appendChild(el('span', 'value', 'round ' + t + ': ' + fmt(vals[t - 1])));
      d.appendChild(label);
      d.appendChild(sparkline(vals, t));
      d.title = c + ' per round: ' + vals.map(function (x) { return fmt(x); }).join(', ');
      charts.appendChild(d);
    });
    rs.appendChild(charts);
    var cnt = el('p', 'muted', 'round ' + t + ': ' + CNT_COLS.map(function (c, ci) {
      var x = count(t, i, ci); return c + ' ' + (x < 0 ? '–' : x);
    }).join(', '));
    rs.appendChild(cnt);
    box.appendChild(rs);

    // feed shown
    var fs = section('Feed shown at round ' + t, 'feed-shown');
    var plans = entriesOf(a, 'plan').filter(function (e) { return e[0] === t; });
    var votes = entriesOf(a, 'vote').filter(function (e) { return e[0] === t; });
    if (!DATA.has_transcripts) {
      fs.appendChild(note('The feed an agent was shown is known only from transcripts.jsonl (the plan and vote prompts of ' +
        'LLM agents with logging.transcripts: true); this run has none.'));
    } else if (!plans.length && !votes.length) {
      fs.appendChild(note('No plan or vote prompt of this agent in round ' + t + ' in transcripts.jsonl.'));
    } else {
      if (plans.length) {
        var prompt = lastUser(plans[0]);
        var feed = feedFromPrompt(prompt);
        fs.appendChild(el('div', 'muted', 'posts it could comment on (from its plan prompt): ' + feed.length));
        feed.forEach(function (f) { fs.appendChild(itemLine(f[0], 'feed-item', f[2])); });
        var det = el('details');
        det.appendChild(el('summary', null, 'the whole plan prompt'));
        det.appendChild(el('pre', null, prompt));
        fs.appendChild(det);
      }
      if (votes.length) {
        var vp = lastUser(votes[0]);
        var vitems = voteItemsFromPrompt(vp);
        fs.appendChild(el('div', 'muted', 'items it voted on (from its vote prompt): ' + vitems.length));
        vitems.forEach(function (f) { fs.appendChild(itemLine(f[0], 'vote-item', f[2])); });
      }
    }
    box.appendChild(fs);

    // ties
    var ts = section('Strongest ties at round ' + t, 'ties');
    ts.appendChild(el('h4', null, 'out (W[' + a + ', peer])'));
    ts.appendChild(tieList(i, t, 'out'));
    ts.appendChild(el('h4', null, 'in (W[peer, ' + a + '])'));
    ts.appendChild(tieList(i, t, 'in'));
    box.appendChild(ts);
    ts.querySelectorAll('details[data-peer]').forEach(function (d) { if (open[d.className + ':' + d.getAttribute('data-peer')]) d.open = true; });

    // actions
    var as = section('Actions (all rounds)', 'actions');
    var mine = rowsByAuthor[i] || [];
    if (!mine.length) as.appendChild(note(DATA.has_events ? 'No POST, COM or DM.' : 'No events.jsonl.'));
    mine.forEach(function (row) {
      var kind = KINDS[IT.kind[row]];
      var d = data(el('div', 'agent-text'), {id: IT.id[row], round: IT.round[row], kind: kind});
      if (IT.round[row] === t) d.classList.add('current');
      if (IT.round[row] > t) d.classList.add('later');
      var meta = el('div', 'meta');
      meta.appendChild(el('span', null, 'round ' + IT.round[row] + ' · ' + kind + ' #' + IT.id[row]));
      if (topicOf(row)) meta.appendChild(el('span', 'topic', topicOf(row)));
      if (kind === 'DM' || kind === 'COM') {
        meta.appendChild(el('span', null, kind === 'DM' ? 'to' : 'on #' + IT.target[row] + ' by'));
        meta.appendChild(agentSpan(IT.recipient[row], 'peer'));
      }
      (mentionsOf.get(row) || []).forEach(function (m) { var s = agentSpan(m, 'mention'); s.textContent = '@' + name(m); meta.appendChild(s); });
      d.appendChild(meta);
      d.appendChild(textDiv(row));
      as.appendChild(d);
    });
    box.appendChild(as);

    // votes
    var vs = section('Votes (all rounds; 0 votes are not logged)', 'votes');
    var myVotes = votesByVoter[i] || [];
    if (!myVotes.length) vs.appendChild(note(DATA.has_events ? 'No non-zero vote.' : 'No events.jsonl.'));
    myVotes.forEach(function (vk) {
      var d = data(el('div', 'vote'), {item: VO.item[vk], value: VO.value[vk], round: VO.round[vk]});
      if (VO.round[vk] === t) d.classList.add('current');
      if (VO.round[vk] > t) d.classList.add('later');
      d.appendChild(el('span', null, 'round ' + VO.round[vk] + ': ' + (VO.value[vk] > 0 ? 'like' : 'dislike') + ' on #' + VO.item[vk] + ' by '));
      d.appendChild(agentSpan(VO.author[vk], 'peer'));
      var row = rowOfId.get(VO.item[vk]);
      if (row !== undefined && TEXTS[row]) d.appendChild(el('span', 'muted', ': ' + TEXTS[row].slice(0, 90) + (TEXTS[row].length > 90 ? '…' : '')));
      vs.appendChild(d);
    });
    box.appendChild(vs);

    // LLM: coach tips, plans, transcript of the round
    /* entries of round t first; those of the other rounds inside a closed <details> (still in the DOM) */
    function byRound(sec, entries, make, what) {
      var others = el('details', 'other-rounds');
      var count = 0;
      entries.forEach(function (e) {
        make(e).forEach(function (d) {
          if (e[0] === t) { d.classList.add('current'); sec.appendChild(d); } else { if (e[0] > t) d.classList.add('later'); others.appendChild(d); count++; }
        });
      });
      if (!entries.some(function (e) { return e[0] === t; }) && entries.length) sec.appendChild(note('None in round ' + t + '.'));
      if (count) { others.insertBefore(el('summary', null, count + ' ' + what + ' of other rounds'), others.firstChild); sec.appendChild(others); }
    }
    var cs = section('Coach tips', 'coach');
    var tips = entriesOf(a, 'coach');
    if (!DATA.has_transcripts) cs.appendChild(note('Coach tips are known only from transcripts.jsonl; this run has none.'));
    else if (!tips.length) cs.appendChild(note(DATA.coached[i] ? 'No coach request in transcripts.jsonl.' : 'Not coached.'));
    byRound(cs, tips, function (e) {
      return parseTips(e[5]).map(function (tip) {
        var d = data(el('div', 'coach-tip'), {round: e[0]});
        d.appendChild(el('span', 'muted', 'round ' + e[0] + ': '));
        d.appendChild(el('span', 'text', tip));
        return d;
      });
    }, 'tips');
    box.appendChild(cs);

    var ps = section('Plans', 'plans');
    var allPlans = entriesOf(a, 'plan');
    if (!DATA.has_transcripts) ps.appendChild(note('Plans are known only from transcripts.jsonl; this run has none.'));
    else if (!allPlans.length) ps.appendChild(note('No plan request in transcripts.jsonl.'));
    byRound(ps, allPlans, function (e) {
      var d = data(el('div', 'plan'), {round: e[0]});
      d.appendChild(el('div', 'muted', 'round ' + e[0] + (e[2] ? ' (from the cache)' : '')));
      d.appendChild(el('pre', 'text', e[5]));
      return [d];
    }, 'plans');
    box.appendChild(ps);

    var fb = section('Fallbacks and invalid actions', 'problems');
    var fcol = CNT_COLS.indexOf('fallbacks'), icol = CNT_COLS.indexOf('invalid'), any = false;
    for (var r = 1; r <= T; r++) {
      var nf = fcol >= 0 ? count(r, i, fcol) : -1, ni = icol >= 0 ? count(r, i, icol) : -1;
      if (nf > 0) { any = true; fb.appendChild(data(el('div', 'fallback', 'round ' + r + ': ' + nf + ' fallback' + (nf === 1 ? '' : 's') + ' (an LLM reply failed validation; the slot became NOT)'), {round: r, count: nf})); }
      if (ni > 0) { any = true; fb.appendChild(data(el('div', 'invalid', 'round ' + r + ': ' + ni + ' invalid action' + (ni === 1 ? '' : 's') + ' (turned into NOT)'), {round: r, count: ni})); }
    }
    if (!any) fb.appendChild(note('None (rounds.csv counts them per round; the reasons are not written to the run directory).'));
    box.appendChild(fb);

    var tr = section('LLM requests in round ' + t, 'transcript');
    var mineT = entriesOf(a).filter(function (e) { return e[0] === t; });
    if (!DATA.has_transcripts) tr.appendChild(note('No transcripts.jsonl.'));
    else if (!mineT.length) tr.appendChild(note('None.'));
    mineT.forEach(function (e) {
      var det = data(el('details', 'transcript-entry'), {round: e[0], purpose: e[1]});
      det.appendChild(el('summary', null, e[1] + (e[2] ? ' (cached)' : '')));
      if (e[3] >= 0) {
        var sd = el('details');
        sd.appendChild(el('summary', 'muted', 'system prompt'));
        sd.appendChild(el('pre', null, lines(DATA.transcripts.system[e[3]])));
        det.appendChild(sd);
      }
      e[4].forEach(function (msg) { det.appendChild(el('div', 'muted', msg[0])); det.appendChild(el('pre', null, lines(msg[1]))); });
      det.appendChild(el('div', 'muted', 'reply'));
      det.appendChild(el('pre', 'reply', e[5]));
      tr.appendChild(det);
    });
    box.appendChild(tr);
  }
  function parseTips(reply) {
    try {
      var v = JSON.parse(reply);
      if (v && Array.isArray(v.tips)) return v.tips.map(String);
    } catch (err) { /* plain text */ }
    return reply.split('\n').map(function (s) { return s.replace(/^\s*[-*\d.)]+\s*/, '').trim(); }).filter(Boolean);
  }

  /* ----------------------------------------------------------------- wiring */
  function updateHash() {
    var parts = ['round=' + state.round];
    if (state.agent) parts.push('agent=' + encodeURIComponent(state.agent));
    if ($('dm-toggle').checked) parts.push('dms=1');
    if (state.theta !== DATA.theta) parts.push('theta=' + state.theta);
    try { history.replaceState(null, '', '#' + parts.join('&')); } catch (err) { /* file:// in some browsers */ }
  }
  function renderAll() {
    var t = state.round;
    $('round-label').textContent = 'round ' + t + ' of ' + T + interventionNote(t);
    renderTimeline();
    renderGraph();
    renderAgentTotals();
    renderAgent();
    updateHash();
  }
  // scheduled interventions (events.jsonl): tick marks on the round slider, named in its label
  var INTERVENTIONS = DATA.interventions || [];
  (function () {
    var list = $('intervention-rounds'), seen = {};
    if (!list) return;
    INTERVENTIONS.forEach(function (iv) {
      if (seen[iv[0]]) return;
      seen[iv[0]] = true;
      var opt = document.createElement('option');
      opt.value = String(iv[0]);
      opt.label = 'intervention';
      list.appendChild(opt);
    });
  })();
  function interventionNote(t) {
    var kinds = INTERVENTIONS.filter(function (iv) { return iv[0] === t; }).map(function (iv) { return iv[1]; });
    return kinds.length ? ' \u2014 intervention: ' + kinds.join(', ') : '';
  }
  function setRound(t) {
    t = Math.max(1, Math.min(T, t | 0));
    state.round = t;
    state.limit = PAGE;
    state.dmLimit = PAGE;
    slider.value = String(t);
    renderAll();
  }
  function openAgent(a) {
    if (AGENT_INDEX[a] === undefined) return;
    state.agent = a;
    renderAgent();
    renderGraph();
    renderAgentTotals();
    updateHash();
    $('agent-page').scrollTop = 0;
  }
  function closeAgent() {
    state.agent = null;
    renderAgent();
    renderGraph();
    renderAgentTotals();
    updateHash();
  }

  initStatic();
  showNotices();
  slider.addEventListener('input', function () { setRound(parseInt(slider.value, 10)); });
  slider.addEventListener('change', function () { if (parseInt(slider.value, 10) !== state.round) setRound(parseInt(slider.value, 10)); });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && state.agent) { closeAgent(); return; }
    if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
    var target = e.target;
    if (target === slider) return;                 // the range input steps itself (and fires input)
    var tag = target && target.tagName;
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') return;
    e.preventDefault();
    setRound(state.round + (e.key === 'ArrowRight' ? 1 : -1));
  });
  ['filter-agent', 'filter-topic', 'filter-group', 'filter-kind'].forEach(function (id) {
    $(id).addEventListener('change', function () { state.limit = PAGE; renderTimeline(); });
  });
  $('search').addEventListener('input', function () { state.limit = PAGE; renderTimeline(); });
  $('dm-toggle').addEventListener('change', function () { $('dms').hidden = !$('dm-toggle').checked; updateHash(); });
  thetaInput.addEventListener('input', function () { renderGraph(); updateHash(); });
  thetaInput.addEventListener('change', function () { renderGraph(); updateHash(); });
  $('close-agent').addEventListener('click', function (e) { e.stopPropagation(); closeAgent(); });
  var agentPage = $('agent-page');
  document.addEventListener('click', function (e) {
    var target = e.target.closest ? e.target.closest('[data-agent]') : null;
    if (!target || target === agentPage) return;
    if (target.closest('summary')) e.preventDefault();       // a peer name inside a tie's summary
    openAgent(target.getAttribute('data-agent'));
  });

  // initial state from the URL (#round=3&agent=agent_2&dms=1&theta=0.2)
  var hash = {};
  (location.hash || '').replace(/^#/, '').split('&').forEach(function (kv) {
    var p = kv.split('=');
    if (p[0]) hash[p[0]] = decodeURIComponent(p[1] || '');
  });
  if (hash.dms === '1') $('dm-toggle').checked = true;
  if (hash.theta && Number.isFinite(parseFloat(hash.theta))) thetaInput.value = hash.theta;
  if (hash.agent && AGENT_INDEX[hash.agent] !== undefined) state.agent = hash.agent;
  setRound(hash.round ? parseInt(hash.round, 10) || 1 : 1);
  document.body.setAttribute('data-ready', '1');

  /* ================================================================= discussion run */
  function initDiscussions() {
    var recs = DATA.discussions, MOD = DATA.moderator;
    var sSel = $('strategy'), dSel = $('discussion');
    DATA.strategies.forEach(function (s) { var o = el('option', null, DATA.labels[s] || s); o.value = s; sSel.appendChild(o); });
    var sum = $('d-summary');
    var head = el('tr');
    ['strategy', 'discussions', 'comments', 'mean toxicity', 'mean argument quality', 'interventions', 'bans'].forEach(function (h) { head.appendChild(el('th', null, h)); });
    sum.appendChild(head);
    DATA.summary.forEach(function (s) {
      var tr = data(el('tr'), {strategy: s.strategy});
      [s.label, s.discussions, s.comments, s.toxicity === null ? 'n/a' : fmt(s.toxicity, 2),
       s.argument_quality === null ? 'n/a' : fmt(s.argument_quality, 2), s.interventions, s.bans].forEach(function (v, k) {
        tr.appendChild(el('td', k ? 'num' : null, v));
      });
      sum.appendChild(tr);
    });
    function fillDiscussions(keep) {
      dSel.textContent = '';
      recs.forEach(function (r, k) {
        if (r.strategy !== sSel.value) return;
        var o = el('option', null, 'discussion ' + r.index + ': ' + r.topic.slice(0, 70));
        o.value = String(r.index);
        dSel.appendChild(o);
      });
      if (keep !== undefined && Array.prototype.some.call(dSel.options, function (o) { return o.value === keep; })) dSel.value = keep;
    }
    function current() {
      for (var k = 0; k < recs.length; k++) if (recs[k].strategy === sSel.value && String(recs[k].index) === dSel.value) return recs[k];
      return null;
    }
    function render() {
      var rec = current(), header = $('d-header'), users = $('d-users'), thread = $('d-thread');
      header.textContent = ''; users.textContent = ''; thread.textContent = '';
      if (!rec) { thread.appendChild(note('No discussion to show.')); return; }
      header.appendChild(el('h2', null, rec.topic));
      header.appendChild(el('div', 'muted', (DATA.labels[rec.strategy] || rec.strategy) + ' · discussion ' + rec.index +
        ' · ' + rec.interventions + ' interventions · ' + rec.bans + ' bans · ROUGE-L diversity ' + fmt(rec.diversity, 3)));
      var bannedAt = {}, warnedAt = {};
      rec.turns.forEach(function (t) {
        t.banned.forEach(function (u) { if (bannedAt[u] === undefined) bannedAt[u] = t.turn; });
        t.warned.forEach(function (u) { (warnedAt[u] = warnedAt[u] || []).push(t.turn); });
      });
      function uname(u) { return rec.users[u] || u; }
      Object.keys(rec.users).forEach(function (u) {
        var li = data(el('li', 'd-user'), {user: u, role: rec.roles[u] || ''});
        li.appendChild(el('b', null, uname(u)));
        li.appendChild(el('span', 'badge role-' + (rec.roles[u] || ''), rec.roles[u] || ''));
        if (warnedAt[u]) { li.classList.add('warned'); li.appendChild(el('span', 'badge warning-badge', 'warned (turn ' + warnedAt[u].join(', ') + ')')); }
        if (bannedAt[u] !== undefined) { li.classList.add('banned'); li.appendChild(el('span', 'badge banned-badge', 'banned (turn ' + bannedAt[u] + ')')); }
        users.appendChild(li);
      });
      var silent = 0;
      rec.turns.forEach(function (t) {
        var isMod = t.agent === MOD;
        if (isMod && !t.text && !t.warned.length && !t.banned.length) { silent++; return; }
        var d = data(el('div', 'd-comment'), {user: t.agent, username: t.username, turn: t.turn});
        if (isMod) d.classList.add('moderator');
        var meta = el('div', 'meta');
        meta.appendChild(el('span', 'item-id', 'turn ' + t.turn));
        meta.appendChild(el('b', null, t.username));
        if (t.role) meta.appendChild(el('span', 'badge role-' + t.role, t.role));
        t.mentions.forEach(function (u) { meta.appendChild(el('span', 'mention', '@' + uname(u))); });
        if (t.warned.length) {
          d.classList.add('warning');
          d.setAttribute('data-warned', t.warned.join(' '));
          meta.appendChild(el('span', 'badge warning-badge', 'warning → ' + t.warned.map(uname).join(', ')));
        }
        if (t.banned.length) {
          d.classList.add('banned');
          d.setAttribute('data-banned', t.banned.join(' '));
          meta.appendChild(el('span', 'badge banned-badge', 'banned: ' + t.banned.map(uname).join(', ')));
        }
        if (!isMod && bannedAt[t.agent] !== undefined) {     // every comment of a user banned in this discussion
          d.classList.add('banned');
          d.setAttribute('data-banned-at', bannedAt[t.agent]);
          meta.appendChild(el('span', 'badge banned-badge', t.turn > bannedAt[t.agent] ? 'banned' :
            'banned (at turn ' + bannedAt[t.agent] + ')'));
        }
        d.appendChild(meta);
        var tx = el('div', 'text', t.text);
        if (!t.text) tx.appendChild(el('span', 'muted', '(no text)'));
        d.appendChild(tx);
        var sc = el('div', 'scores');
        sc.appendChild(data(el('span', 'toxicity', t.toxicity === null ? 'n/a' : fmt(t.toxicity, 2)), {value: t.toxicity === null ? '' : t.toxicity}));
        sc.appendChild(data(el('span', 'argument-quality', t.argument_quality === null ? 'n/a' : fmt(t.argument_quality, 2)),
                            {value: t.argument_quality === null ? '' : t.argument_quality}));
        if (t.toxicity_ratings.length) sc.title = 'annotators: toxicity ' + t.toxicity_ratings.join(', ') + '; argument quality ' + t.argument_quality_ratings.join(', ');
        d.appendChild(sc);
        if (t.invalid.length) d.appendChild(el('div', 'muted', 'invalid: ' + t.invalid.join('; ')));
        thread.appendChild(d);
      });
      if (silent) thread.appendChild(el('p', 'muted', 'The moderator stayed silent at ' + silent + ' turns (not shown).'));
    }
    sSel.addEventListener('change', function () { fillDiscussions(dSel.value); render(); });
    dSel.addEventListener('change', render);
    fillDiscussions();
    render();
    document.body.setAttribute('data-ready', '1');
  }
})();
