// Evaluated inside a report page by browser.js (tests/shell/t1110): reads the page's embedded
// report document and checks what is drawn against it. Returns {data, series, problems, ...};
// the test wants problems to be empty. Nothing here trusts the page's own data-* counts alone:
// points are counted in the polylines and markers, cells are read as text.
(() => {
  const problems = [];
  const bad = (m) => problems.push(m);
  const el = document.getElementById('dlk-report-data');
  if (!el) return { problems: ['no embedded data'] };
  const data = JSON.parse(el.textContent);

  // every series of every chart: its points as drawn
  const series = {};
  for (const g of document.querySelectorAll('svg.chart g.series')) {
    const line = g.querySelector('polyline');
    const pts = line.getAttribute('points').trim().split(/\s+/).filter(Boolean).map((p) => p.split(',').map(Number));
    series[`${g.closest('svg').id}/${g.dataset.series}`] = {
      points: pts.length, markers: g.querySelectorAll('.pt').length, run: Number(g.dataset.run),
      dashed: line.hasAttribute('stroke-dasharray'), ys: pts.map((p) => p[1]),
      shape: (g.querySelector('.pt') || {}).tagName || null,
    };
  }

  // what the data says each chart must hold
  const expect = (key, values, withMarkers) => {
    const s = series[key];
    if (!s) { if (values.length) bad(`${key}: not drawn, for ${values.length} values`); return; }
    if (s.points !== values.length) bad(`${key}: ${s.points} points drawn for ${values.length} values`);
    if (withMarkers && s.markers !== values.length) bad(`${key}: ${s.markers} markers for ${values.length} values`);
    // higher values sit higher on the screen (smaller y), equal ones level
    for (let i = 0; i < values.length; i++)
      for (let j = 0; j < values.length; j++)
        if (values[i] > values[j] + 1e-9 && !(s.ys[i] <= s.ys[j])) {
          bad(`${key}: value ${values[i]} is drawn below ${values[j]}`);
          return;
        }
  };
  const marks = { loss: 0, time: 0 };
  data.runs.forEach((r, i) => {
    const p = i ? 'b-' : '';
    const h = r.history;
    if (!h) return;
    const tested = h.epochs.filter((e) => 'test_accuracy' in e);
    expect(`chart-loss/${p}step-loss`, h.step_loss.values, false);
    expect(`chart-loss/${p}train-loss`, h.epochs.map((e) => e.train_loss), true);
    expect(`chart-loss/${p}test-loss`, tested.map((e) => e.test_loss), true);
    expect(`chart-accuracy/${p}test-accuracy`, tested.map((e) => e.test_accuracy), true);
    expect(`chart-throughput/${p}throughput`, h.epochs.map((e) => e.samples_per_sec), true);
    const resumes = h.events.filter((e) => e.event === 'resume').length;
    marks.loss += resumes;
    marks.time += resumes;
  });
  const drawnMarks = (id) => document.querySelectorAll(`#${id} g.mark`).length;
  if (drawnMarks('chart-loss') !== marks.loss) bad(`chart-loss: ${drawnMarks('chart-loss')} marks for ${marks.loss} resumes`);
  if (drawnMarks('chart-throughput') !== marks.time) bad(`chart-throughput: ${drawnMarks('chart-throughput')} marks`);

  // without colour: the two runs differ in dashing, the series of a chart in marker shape
  for (const [k, s] of Object.entries(series)) if ((s.run === 1) !== s.dashed) bad(`${k}: run ${s.run} is ${s.dashed ? '' : 'not '}dashed`);
  for (const chart of ['chart-loss']) {
    const shapes = Object.entries(series).filter(([k, s]) => k.startsWith(chart) && s.run === 0 && s.shape).map(([, s]) => s.shape);
    if (new Set(shapes).size !== shapes.length) bad(`${chart}: two series share the marker ${shapes}`);
  }

  // the heat maps print every count; the difference prints signed numbers
  const cellsOf = (id) => {
    const t = document.getElementById(id);
    return t ? [...t.tBodies[0].rows].map((row) => [...row.cells].filter((c) => c.tagName === 'TD').map((c) => c.textContent.trim())) : null;
  };
  let heatCells = 0;
  data.runs.forEach((r, i) => {
    const cm = r.metrics && r.metrics.confusion_matrix;
    if (!cm) return;
    const cells = cellsOf(`confusion-${data.runs.length > 1 ? 'ab'[i] : 'a'}`);
    if (!cells) { bad(`run ${i}: no heat map`); return; }
    cm.forEach((row, a) => row.forEach((v, b) => {
      heatCells++;
      if (cells[a][b] !== String(v)) bad(`run ${i} cell ${a},${b}: "${cells[a][b]}" for ${v}`);
    }));
    const rec = r.metrics.recall;
    cm.forEach((row, a) => {
      if (cells[a][row.length] !== `${(100 * rec[a]).toFixed(2)}%`) bad(`run ${i} recall ${a}: ${cells[a][row.length]}`);
    });
  });
  const diff = data.comparison && data.comparison.confusion_diff;
  if (diff) {
    const cells = cellsOf('confusion-diff');
    diff.values.forEach((row, a) => row.forEach((v, b) => {
      const n = Number(cells[a][b].replace('\u2212', '-'));
      const want = diff.unit === 'count' ? v : Math.round(v * 10) / 10;
      if (Math.abs(n - want) > 1e-9) bad(`difference ${a},${b}: "${cells[a][b]}" for ${v}`);
    }));
  }
  const moved = [...document.querySelectorAll('#moved-most li')].map((li) => Number(li.dataset.class));
  if (data.comparison && data.comparison.moved_most) {
    const want = data.comparison.moved_most.map((m) => m.index);
    if (JSON.stringify(moved) !== JSON.stringify(want)) bad(`moved most: ${moved} for ${want}`);
  }

  // the summary prints the data's numbers
  const fig = (id) => { const d = document.querySelector(`#fig-${id} dd`); return d ? d.firstChild.textContent : null; };
  const m0 = data.runs[0].metrics;
  if (m0 && 'test_accuracy' in m0 && fig('test-accuracy') !== `${(100 * m0.test_accuracy).toFixed(2)}%`)
    bad(`summary test accuracy: ${fig('test-accuracy')}`);
  if (m0 && 'test_loss' in m0 && fig('test-loss') !== m0.test_loss.toFixed(4)) bad(`summary test loss: ${fig('test-loss')}`);

  // text that scales: everything follows the reader's font size
  const sizes = () => ['h1', 'h2', 'td', 'figcaption', 'svg.chart text.tick', 'ul.legend li']
    .map((q) => { const e = document.querySelector(q); return e ? parseFloat(getComputedStyle(e).fontSize) : 0; });
  const before = sizes();
  document.documentElement.style.fontSize = '200%';
  const after = sizes();
  document.documentElement.style.fontSize = '';
  before.forEach((b, i) => { if (!(b > 0) || Math.abs(after[i] / b - 2) > 0.01) bad(`text ${i} does not scale: ${b} -> ${after[i]}`); });

  // a print style
  const rules = [...document.styleSheets].flatMap((s) => [...s.cssRules]);
  if (!rules.some((r) => r.media && [...r.media].includes('print'))) bad('no print style');

  // nothing that could load or run
  if (document.querySelectorAll('script:not([type="application/json"]), link, img, iframe, object, embed').length) bad('an element that loads');

  return { data, series, marks, heatCells, moved, problems, title: document.title };
})()
