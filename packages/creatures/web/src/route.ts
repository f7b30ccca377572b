/**
 * Hash routes of the page, so that links work with the server's static file serving and no server-side
 * routes: `#/` (home), `#/new` (create), `#/creatures/<name>` (detail), `#/creatures/<name>/edit` (edit).
 */
import { useEffect, useState } from 'react';

/** A parsed route. */
export type Route =
  | { page: 'home' }
  | { page: 'new' }
  | { page: 'creature'; name: string }
  | { page: 'edit'; name: string };

/** Parses a location hash such as `#/creatures/Mr.%20Mime/edit`. */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'new') return { page: 'new' };
  if (parts[0] === 'creatures' && parts[1]) {
    return parts[2] === 'edit' ? { page: 'edit', name: parts[1] } : { page: 'creature', name: parts[1] };
  }
  return { page: 'home' };
}

/** The hash link of a creature's detail page. */
export function creatureHref(name: string): string {
  return `#/creatures/${encodeURIComponent(name)}`;
}

/** Whether the user has moved to another route since the page loaded (then page headings take focus). */
let navigated = false;

/** True once a route change happened after the page loaded; false on the page's first route. */
export function hasNavigated(): boolean {
  return navigated;
}

/** The current route; re-renders on `hashchange`. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const update = () => {
      navigated = true;
      setRoute(parseRoute(window.location.hash));
    };
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return route;
}

/** Navigates to a hash route. */
export function navigate(hash: string): void {
  window.location.hash = hash;
}
