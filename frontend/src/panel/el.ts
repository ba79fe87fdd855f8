/** One element of the panel: a tag with its class and, when given, its text (written as text, never as HTML). */
export function el(tag: string, cls: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  node.className = cls;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}
