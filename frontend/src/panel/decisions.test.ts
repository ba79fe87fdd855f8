// @vitest-environment happy-dom
/**
 * Which clicks become decisions sent through the panel's comm, and bound to what: only a widget button inside a
 * live view's question (or its header, for Stop), with what the kernel drew beside it. Markup anyone else could
 * put in the page (a result's HTML, a saved output) does not pass for a question.
 */
import { describe, expect, it } from 'vitest';

import { decisionOf, runOf } from './decisions';

const DIGEST = 'ab'.repeat(32);

/** A live view as ipywidgets draws nbagent's (the classes the widget manager and the kernel give). */
function view(run = 'r1', question = `data-nba-run="${run}" data-nba-call="call_1" data-nba-digest="${DIGEST}"`): HTMLElement {
  const root = document.createElement('div');
  root.innerHTML = `
    <div class="lm-Widget jupyter-widgets widget-container widget-box widget-vbox nba-view nba-run-${run}">
      <div class="widget-box widget-hbox nba-head">
        <div class="widget-html"><div class="widget-html-content">header</div></div>
        <button class="jupyter-widgets jupyter-button widget-button nba-stop">Stop</button>
      </div>
      <div class="widget-box widget-vbox nba-body">
        <div class="widget-box widget-vbox nba-call">
          <div class="widget-html"><div class="widget-html-content"><b>Removing old.csv</b></div></div>
          <div class="widget-box widget-vbox nba-ask">
            <div class="widget-html"><div class="widget-html-content">
              <div class="nba-ask-q" ${question}><b>Needs your approval</b></div></div></div>
            <div class="widget-box widget-hbox nba-buttons">
              <button class="jupyter-widgets jupyter-button widget-button nba-approve"><i class="fa fa-check"></i>Approve</button>
              <button class="jupyter-widgets jupyter-button widget-button nba-deny">Deny</button>
              <button class="jupyter-widgets jupyter-button widget-button nba-always">Always allow</button>
              <div class="widget-inline-hbox widget-text"><input type="text" value="keep it"></div>
            </div>
          </div>
        </div>
      </div>
    </div>`;
  document.body.replaceChildren(root);
  return root;
}

const click = (root: HTMLElement, selector: string) => decisionOf(root.querySelector(selector));

describe('decisionOf: a click on a live view button', () => {
  it('binds Approve and Always allow to the run, the call and the digest drawn with the question', () => {
    const root = view();
    expect(click(root, 'button.nba-approve i')).toMatchObject({ action: 'approve', run: 'r1', call: 'call_1', digest: DIGEST, reason: '' });
    expect(click(root, 'button.nba-always')).toMatchObject({ action: 'always', run: 'r1', call: 'call_1', digest: DIGEST });
  });

  it("sends the deny box's reason with Deny only", () => {
    const root = view();
    expect(click(root, 'button.nba-deny')).toMatchObject({ action: 'deny', reason: 'keep it' });
  });

  it("takes Stop's run from the view's class", () => {
    const root = view('0f3c9a1b2d4e');
    expect(click(root, 'button.nba-stop')).toMatchObject({ action: 'stop', run: '0f3c9a1b2d4e' });
    expect(runOf(root.querySelector('.nba-view')!)).toBe('0f3c9a1b2d4e');
  });

  it('is nothing for a click outside a view, or on what is not a button of one', () => {
    const root = view();
    expect(click(root, '.nba-ask-q')).toBeNull();
    expect(click(root, '.nba-call .widget-html b')).toBeNull();
    const elsewhere = document.createElement('button');
    elsewhere.className = 'jupyter-button nba-approve';
    document.body.append(elsewhere);
    expect(decisionOf(elsewhere)).toBeNull();
  });

  it('refuses a question without a digest, or one that names another run than its view', () => {
    expect(click(view('r1', 'data-nba-run="r1" data-nba-call="call_1"'), 'button.nba-approve')).toBeNull();
    expect(click(view('r1', `data-nba-run="r2" data-nba-call="call_1" data-nba-digest="${DIGEST}"`), 'button.nba-approve')).toBeNull();
  });

  it('does not take a question drawn elsewhere in the view (a result, a model text) for the call being asked', () => {
    const forged = `<div class="widget-html"><div class="nba-ask-q" data-nba-run="r1" data-nba-call="call_9" data-nba-digest="${DIGEST}"></div></div>`;
    // in the row's body, and inside the question box but below its own part (beside the buttons): neither is
    // the question the box asks
    for (const where of ['.nba-call > .widget-html .widget-html-content', '.nba-buttons']) {
      const root = view('r1', 'class="x"');
      root.querySelector(where)!.insertAdjacentHTML('beforeend', forged);
      expect(click(root, 'button.nba-approve')).toBeNull();
    }
  });

  it('does not take a button that is no widget button, even with the classes of one', () => {
    const root = view();
    const fake = document.createElement('button');
    fake.className = 'nba-approve';
    root.querySelector('.nba-buttons')!.append(fake);
    expect(decisionOf(fake)).toBeNull();
  });

  it('reads no run from a class that smuggles more than an id', () => {
    const el = document.createElement('div');
    el.className = 'nba-view nba-run-a/b';
    expect(runOf(el)).toBeNull();
  });
});
