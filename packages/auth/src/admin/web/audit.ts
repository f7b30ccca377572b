/** The Audit log view: a filter (category, outcome, subject, time range), a pager and the events' table. */
import { call, client, type paths } from './api.ts';
import { PAGE } from './config.ts';
import { card, el, field, table, text, when } from './dom.ts';
import { show } from './shell.ts';

type AuditQuery = NonNullable<paths['/audit']['get']['parameters']['query']>;

const FILTER_FIELDS = ['category', 'outcome', 'subject', 'from', 'to'] as const;
/** The filter as entered (`from`/`to` as `datetime-local` values) and the page's offset. */
const auditFilter: Record<(typeof FILTER_FIELDS)[number], string> & { offset: number } = {
  category: '',
  outcome: '',
  subject: '',
  from: '',
  to: '',
  offset: 0,
};

/** The Audit log view. */
export async function auditView(): Promise<Node> {
  const query: AuditQuery = { limit: PAGE, offset: auditFilter.offset };
  if (auditFilter.category) query.category = auditFilter.category;
  if (auditFilter.outcome) query.outcome = auditFilter.outcome as AuditQuery['outcome'];
  if (auditFilter.subject) query.subject = auditFilter.subject;
  if (auditFilter.from) query.from = new Date(auditFilter.from).toISOString();
  if (auditFilter.to) query.to = new Date(auditFilter.to).toISOString();
  const page = await call(client.GET('/audit', { params: { query } }));
  const form = card(
    { 'aria-label': 'Audit filter' },
    null,
    [
      field(
        'Category',
        el('input', { name: 'category', value: auditFilter.category, placeholder: 'Login, Token, Admin…' }),
      ),
      field(
        'Outcome',
        el('input', { name: 'outcome', value: auditFilter.outcome, placeholder: 'Success, Denied…' }),
      ),
      field('Subject id', el('input', { name: 'subject', value: auditFilter.subject })),
      field('From', el('input', { name: 'from', type: 'datetime-local', value: auditFilter.from })),
      field('To', el('input', { name: 'to', type: 'datetime-local', value: auditFilter.to })),
    ],
    'Apply filter',
    (data) => {
      for (const key of FILTER_FIELDS) auditFilter[key] = text(data, key).trim();
      auditFilter.offset = 0;
      show('audit');
    },
  );
  const rows = page.items.map((e) =>
    el(
      'tr',
      {},
      el('td', { text: when(e.time) }),
      el('td', { text: e.category }),
      el('td', { text: e.outcome }),
      el('td', { text: e.subjectName ? `${e.subjectName} (${e.subjectId})` : (e.subjectId ?? '') }),
      el('td', { text: e.clientId ?? '' }),
      el('td', { text: e.failureCode ?? '' }),
      el('td', { text: e.remoteAddress ?? '' }),
      el('td', {}, el('pre', { text: e.details ? JSON.stringify(e.details) : '' })),
    ),
  );
  const last = Math.min(page.offset + page.items.length, page.total);
  const pager = el(
    'div',
    { class: 'pager' },
    el('button', {
      type: 'button',
      class: 'secondary',
      text: 'Newer',
      disabled: page.offset === 0,
      onclick: () => {
        auditFilter.offset = Math.max(0, auditFilter.offset - PAGE);
        show('audit');
      },
    }),
    el('span', { text: page.total ? `${page.offset + 1}–${last} of ${page.total}` : 'no events' }),
    el('button', {
      type: 'button',
      class: 'secondary',
      text: 'Older',
      disabled: last >= page.total,
      onclick: () => {
        auditFilter.offset += PAGE;
        show('audit');
      },
    }),
  );
  return el(
    'div',
    {},
    form,
    pager,
    table(['Time', 'Category', 'Outcome', 'Subject', 'Client', 'Failure code', 'Address', 'Details'], rows),
  );
}
