/**
 * Watching a part of the page for what is drawn in it: a MutationObserver on `root`'s subtree whose added
 * elements are collected and handed on together, at most once per animation frame (a live view's HTML is
 * replaced on every update: one look per frame, over the nodes that were added, not one per mutation).
 */

/**
 * From now on, `handle(nodes)` once per animation frame with the elements added under `root` since the last
 * call (those `keep` accepts; they may have left the page meanwhile). Returns a function that stops.
 */
export function watchAdded(
  root: HTMLElement,
  handle: (nodes: Element[]) => void,
  keep: (node: Element) => boolean = () => true
): () => void {
  let added: Element[] = [];
  let frame = 0;
  const observer = new MutationObserver(records => {
    for (const record of records) {
      for (const node of Array.from(record.addedNodes)) {
        if (node.nodeType === Node.ELEMENT_NODE && keep(node as Element)) {
          added.push(node as Element);
        }
      }
    }
    if (added.length && !frame) {
      frame = requestAnimationFrame(() => {
        frame = 0;
        const nodes = added;
        added = [];
        handle(nodes);
      });
    }
  });
  observer.observe(root, { childList: true, subtree: true });
  return () => {
    observer.disconnect();
    if (frame) {
      cancelAnimationFrame(frame);
    }
  };
}
