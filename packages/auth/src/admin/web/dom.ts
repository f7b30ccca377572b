/**
 * DOM helpers of the admin page. Every text (record data comes from other administrators) is written with
 * `textContent` or as a text node, never as HTML.
 */

/** A value of {@link el}'s `props`: an attribute, `text`, `value`, `checked` or an `on<Event>` handler. */
export type Prop = string | number | boolean | null | undefined | ((event: Event) => void);
/** A child of {@link el}: a node, a text, nothing (skipped) or a list of those. */
export type Child = Node | string | number | null | undefined | false | readonly Child[];

/**
 * Creates an element `tag`; `props` may hold attributes (`true` sets an empty attribute; `false`, null and
 * undefined skip it), `text`, `value`, `checked` and `on<Event>` handlers; children are nodes or text.
 */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, Prop> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === 'text') node.textContent = String(value);
    else if (key === 'value') (node as HTMLInputElement).value = String(value);
    else if (key === 'checked') (node as HTMLInputElement).checked = Boolean(value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  const append = (child: Child): void => {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) for (const c of child as readonly Child[]) append(c);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  };
  for (const child of children) append(child);
  return node;
}

/** The element with id `id` of the page's HTML. @throws Error when the page has no such element. */
export function byId(id: string): HTMLElement {
  const node = document.getElementById(id);
  if (!node) throw new Error(`admin page: no element #${id}`);
  return node;
}

/** Shows `message` in the status line (`kind` `ok` or `error`; an error is an alert), with `secret` as code. */
export function status(message: string, kind: 'ok' | 'error' = 'ok', secret?: string): void {
  const box = byId('status');
  box.replaceChildren();
  if (!message) return;
  box.append(
    el(
      'p',
      { class: kind, role: kind === 'error' ? 'alert' : undefined },
      message,
      secret ? el('code', { text: secret }) : null,
    ),
  );
}

/** The items of a comma-, space- or newline-separated list. */
export const list = (text: string): string[] =>
  text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
/** `items` joined with commas (empty for none). */
export const joined = (items: readonly string[] | null | undefined): string => (items ?? []).join(', ');
/** An RFC 3339 date-time in the browser's locale (empty for none). */
export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '');

/** A labelled form control. */
export function field(label: string, input: HTMLElement): HTMLLabelElement {
  return el('label', {}, label, input);
}

/** A labelled checkbox named `name`. */
export function checkbox(name: string, label: string, checked: boolean): HTMLLabelElement {
  return el('label', { class: 'inline' }, el('input', { type: 'checkbox', name, checked }), label);
}

/** A plain button (`kind`: CSS class `secondary` or `danger`). */
export function button(text: string, onclick: () => void, kind = 'secondary'): HTMLButtonElement {
  return el('button', { type: 'button', class: kind, text, onclick });
}

/** A table with a header row of `headers` and `rows` as its body. */
export function table(headers: readonly string[], rows: readonly Node[]): HTMLTableElement {
  return el(
    'table',
    {},
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        headers.map((h) => el('th', { scope: 'col', text: h })),
      ),
    ),
    el('tbody', {}, rows),
  );
}

/**
 * A card form: `attributes` (its `aria-label`, …), an optional heading, its fields and a submit button;
 * `onSubmit(data)` gets the form's FormData (the page does not navigate).
 */
export function card(
  attributes: Record<string, Prop>,
  heading: string | null,
  fields: readonly Child[],
  submit: string,
  onSubmit: (data: FormData) => void,
): HTMLFormElement {
  const form = el(
    'form',
    { class: 'card', ...attributes },
    heading ? el('h2', { text: heading }) : null,
    el('div', { class: 'fields' }, fields, el('button', { type: 'submit', text: submit })),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    onSubmit(new FormData(form));
  });
  return form;
}

/** The text entered in the field `name` of `data` ('' when absent). */
export const text = (data: FormData, name: string): string => String(data.get(name) ?? '');
/** The comma- or space-separated list entered in the field `name` of `data`. */
export const listField = (data: FormData, name: string): string[] => list(text(data, name));
/** Whether the checkbox `name` of `data` is checked. */
export const checked = (data: FormData, name: string): boolean => data.get(name) === 'on';
