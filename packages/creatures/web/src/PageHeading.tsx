/**
 * The heading of a page (the one `h1`) and the document title that goes with it. After a route change the
 * heading takes keyboard focus and the page scrolls to its top, where the main content is, so that a tap or click in the
 * list shows what it opened (also on a phone, where the list is below the content) and screen readers
 * announce the new page. On the page's first route focus stays where the browser puts it, so the first Tab
 * still reaches the skip link.
 */
import { type ReactNode, useEffect, useRef } from 'react';
import { hasNavigated } from './route.ts';

/** Name of the site, the last part of every page title. */
export const SITE_NAME = 'Creatures';

/** Sets `document.title` to `title · Creatures` (or `Creatures` alone) while mounted. */
export function useDocumentTitle(title: string | null): void {
  useEffect(() => {
    document.title = title ? `${title} · ${SITE_NAME}` : SITE_NAME;
  }, [title]);
}

/** Props of {@link PageHeading}. */
export interface PageHeadingProps {
  /** What the heading shows. */
  children: ReactNode;
  /** The page title's first part; `null` for the site name alone. */
  title: string | null;
  id?: string;
}

/** The page's `h1`; sets the document title and takes focus after a route change. */
export function PageHeading({ children, title, id }: PageHeadingProps) {
  const ref = useRef<HTMLHeadingElement>(null);
  useDocumentTitle(title);
  useEffect(() => {
    const heading = ref.current;
    if (!heading || !hasNavigated()) return;
    // The main content is the first column in every layout, right below the site header.
    window.scrollTo({ top: 0 });
    heading.focus({ preventScroll: true });
  }, []);
  return (
    <h1 ref={ref} id={id} tabIndex={-1} className="page-heading">
      {children}
    </h1>
  );
}
