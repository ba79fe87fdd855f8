// @vitest-environment happy-dom
/**
 * "Make cells" goes only on the line nbagent's own view of a finished run draws (with a run id of the shape
 * nbagent makes), never on look-alike markup in a tool's result, the model's text or a sanitized fragment; a
 * click asks the kernel once and says what it did.
 */
import { describe, expect, it } from 'vitest';

import { RUN_ID, makeCellsButton, runOfLine, watchKernelOnly } from './tocells';

const RUN = '5eabab42da36';

function page(inner: string): HTMLElement {
  const root = document.createElement('div');
  root.innerHTML = inner;
  document.body.replaceChildren(root);
  return root;
}

const LINE = `<div class="nba-kernel-only" data-run="${RUN}">3 names exist only in the kernel: df, df_clean, helper</div>`;

describe('which lines get the button', () => {
  it('the header line of an nbagent view', () => {
    const root = page(`<div class="nba"><div class="nba-head">${LINE}</div></div>`);
    expect(runOfLine(root.querySelector('.nba-kernel-only')!)).toBe(RUN);
  });

  it.each([
    ['outside any view', LINE],
    ['inside a tool result', `<div class="nba"><div class="nba-result">${LINE}</div></div>`],
    ['inside the model text', `<div class="nba"><div class="nba-md">${LINE}</div></div>`],
    ['inside a sanitized fragment', `<div class="nba"><div class="nba-safe">${LINE}</div></div>`],
    ['with a run id nbagent never makes', `<div class="nba">${LINE.replace(RUN, '../../x')}</div>`],
    ['without a run id', `<div class="nba">${LINE.replace(` data-run="${RUN}"`, '')}</div>`]
  ])('not %s', (_what, markup) => {
    const root = page(markup);
    expect(runOfLine(root.querySelector('.nba-kernel-only')!)).toBeNull();
  });

  it('run ids have the shape nbagent makes', () => {
    expect(RUN_ID.test(RUN)).toBe(true);
    expect(RUN_ID.test(`${RUN}0`)).toBe(false);
  });
});

describe('the button', () => {
  it('is added once, and a click asks for exactly that run, then says what happened', async () => {
    const root = page(`<div class="nba">${LINE}</div><div class="nba"><div class="nba-result">${LINE}</div></div>`);
    const asked: string[] = [];
    const stop = watchKernelOnly(root, run => {
      asked.push(run);
      return Promise.resolve('Proposed below');
    });
    watchKernelOnly(root, () => Promise.resolve('twice'))(); // a second look adds no second button
    const buttons = root.querySelectorAll('button.nba-to-cells');
    expect(buttons.length).toBe(1);
    (buttons[0] as HTMLButtonElement).click();
    expect((buttons[0] as HTMLButtonElement).disabled).toBe(true);
    await Promise.resolve();
    await Promise.resolve();
    expect(asked).toEqual([RUN]);
    expect(buttons[0].textContent).toBe('Proposed below');
    stop();
  });

  it('says why when the kernel refuses, and can be clicked again', async () => {
    const b = makeCellsButton(RUN, () => Promise.reject(new Error('there is no run')));
    document.body.replaceChildren(b);
    b.click();
    await Promise.resolve();
    await Promise.resolve();
    expect(b.disabled).toBe(false);
    expect(b.textContent).toBe('Make cells');
    expect(b.title).toContain('there is no run');
  });
});
