/**
 * The page's frame: the views of the navigation buttons, the current view, and {@link act}, which runs an API
 * action, reports it in the status line and shows the current view again.
 */
import { byId, el, status } from './dom.ts';

/** A view: builds the content of the `#view` section (it may call the API). */
export type View = () => Promise<Node>;
/** The names of the navigation buttons' views (`data-view`). */
export type ViewName = 'users' | 'roles' | 'clients' | 'permissions' | 'audit';

let views: Record<ViewName, View> | undefined;
let currentView: ViewName = 'users';

/** Sets the views of the navigation buttons (once, at start). */
export function setViews(all: Record<ViewName, View>): void {
  views = all;
}

/** Whether `name` names a view. */
export const isViewName = (name: string | undefined): name is ViewName =>
  name === 'users' || name === 'roles' || name === 'clients' || name === 'permissions' || name === 'audit';

/** Shows the view `name` (the current one by default); a failing view shows its error instead. */
export async function show(name: ViewName = currentView): Promise<void> {
  currentView = name;
  for (const button of document.querySelectorAll<HTMLButtonElement>('nav button')) {
    if (button.dataset.view === name) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  const view = byId('view');
  try {
    if (!views) throw new Error('admin page: no views');
    view.replaceChildren(await views[name]());
  } catch (error) {
    view.replaceChildren(el('p', { class: 'error', text: (error as Error).message }));
  }
}

/**
 * Runs `fn`, shows its success message (a text, or made from its result; a `clientSecret` in the result is
 * shown after it) or its error; shows the current view again on success. Resolves with whether it succeeded.
 */
export async function act<T>(
  message: string | ((result: T) => string),
  fn: () => Promise<T>,
): Promise<boolean> {
  try {
    const result = await fn();
    const secret = (result as { clientSecret?: unknown } | null | undefined)?.clientSecret;
    status(
      typeof message === 'function' ? message(result) : message,
      'ok',
      typeof secret === 'string' ? secret : undefined,
    );
    await show();
    return true;
  } catch (error) {
    status((error as Error).message, 'error');
    return false;
  }
}

/** A click handler that asks `question` and runs `fn` when confirmed. */
export function confirmThen(question: string, fn: () => unknown): () => void {
  return () => {
    if (confirm(question)) fn();
  };
}
