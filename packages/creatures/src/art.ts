/**
 * Creature pictures drawn from the creature's own data, so the server needs no image files and no
 * network: an SVG 1.1 document (`image/svg+xml`) whose background shows the creature's types as colours
 * and whose emblem (shape and initials) comes from its name. The same data always gives the same bytes.
 * Served at `GET /images/creatures/<number>.svg` ({@link imagePath}); `Creature.image` is that path.
 */
import type { Creature } from './store.ts';

/** URL path prefix of the pictures; the file name is the creature's number (`25.svg`). */
export const IMAGE_PREFIX = '/images/creatures/';

/** Background colour of each elemental type (lower-case name → `#rrggbb`); unknown types are grey. */
export const TYPE_COLOURS: Readonly<Record<string, string>> = {
  normal: '#a8a77a',
  fire: '#ee8130',
  water: '#6390f0',
  electric: '#f7d02c',
  grass: '#7ac74c',
  ice: '#96d9d6',
  fighting: '#c22e28',
  poison: '#a33ea1',
  ground: '#e2bf65',
  flying: '#a98ff3',
  psychic: '#f95587',
  bug: '#a6b91a',
  rock: '#b6a136',
  ghost: '#735797',
  dragon: '#6f35fc',
  dark: '#705746',
  steel: '#b7b7ce',
  fairy: '#d685ad',
};
const UNKNOWN_TYPE = '#9e9e9e';

/** The creature's number: its id read as a decimal number (`"025"` → 25); null for a non-numeric id. */
export function creatureNumber(creature: Pick<Creature, 'id'>): number | null {
  return /^\d{1,15}$/.test(creature.id) ? Number(creature.id) : null;
}

/** The path of a creature's picture (`/images/creatures/25.svg`), or null when it has no number. */
export function imagePath(creature: Pick<Creature, 'id'>): string | null {
  const n = creatureNumber(creature);
  return n === null ? null : `${IMAGE_PREFIX}${n}.svg`;
}

/** 32-bit FNV-1a hash of a string's UTF-16 code units (deterministic, not cryptographic). */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Up to two initials: the first letters of the first two words, or the first two letters of one word. */
function initials(name: string): string {
  const words = name.split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  const letters =
    words.length >= 2
      ? [...(words[0] ?? '')][0]! + [...(words[1] ?? '')][0]!
      : [...(words[0] ?? '?')].slice(0, 2).join('');
  return letters.toUpperCase();
}

/** Points of a regular polygon with `sides` corners of radius `r` around (64, 60), rotated by `turn` radians. */
function polygon(sides: number, r: number, turn: number, inner?: number): string {
  const points: string[] = [];
  const corners = inner === undefined ? sides : sides * 2;
  for (let i = 0; i < corners; i++) {
    const radius = inner !== undefined && i % 2 === 1 ? inner : r;
    const angle = turn + (i * 2 * Math.PI) / corners;
    points.push(
      `${(64 + radius * Math.sin(angle)).toFixed(1)},${(60 - radius * Math.cos(angle)).toFixed(1)}`,
    );
  }
  return points.join(' ');
}

/** The emblem shape picked by the name's hash: circle, triangle, diamond, pentagon, hexagon or star. */
function emblem(h: number, fill: string): string {
  const turn = ((h >>> 8) % 12) * (Math.PI / 36) - Math.PI / 6;
  const style = `fill="${fill}" stroke="#ffffff" stroke-width="4" stroke-linejoin="round"`;
  switch (h % 6) {
    case 0:
      return `<circle cx="64" cy="60" r="36" ${style}/>`;
    case 1:
      return `<polygon points="${polygon(3, 44, turn / 3)}" ${style}/>`;
    case 2:
      return `<polygon points="${polygon(4, 42, 0)}" ${style}/>`;
    case 3:
      return `<polygon points="${polygon(5, 40, turn / 5)}" ${style}/>`;
    case 4:
      return `<polygon points="${polygon(6, 38, Math.PI / 6)}" ${style}/>`;
    default:
      return `<polygon points="${polygon(5, 44, 0, 22)}" ${style}/>`;
  }
}

/**
 * The picture of a creature as an SVG document (128×128 user units): a background in the colour of its
 * first type (a diagonal split with the second type's colour for dual-typed creatures), an emblem whose
 * shape and darkness depend on the name, the name's initials on it and the number below. Text is
 * XML-escaped; the output depends only on `id`, `name` and `types`.
 */
export function creatureSvg(creature: Pick<Creature, 'id' | 'name' | 'types'>): string {
  const colours = creature.types.map((t) => TYPE_COLOURS[t.toLowerCase()] ?? UNKNOWN_TYPE);
  const first = colours[0] ?? UNKNOWN_TYPE;
  const second = colours[1];
  const h = hash(creature.name);
  const shade = ['#1f2937', '#312e81', '#7c2d12', '#14532d', '#4a044e', '#0c4a6e'][(h >>> 4) % 6]!;
  const n = creatureNumber(creature);
  const label = n === null ? escapeXml(creature.id) : `#${String(n).padStart(3, '0')}`;
  const title = escapeXml(`${creature.name} (${creature.types.join('/') || 'no type'})`);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 128 128" width="128" height="128" role="img">` +
    `<title>${title}</title>` +
    `<rect width="128" height="128" rx="16" fill="${first}"/>` +
    (second ? `<path d="M128 0V112a16 16 0 0 1-16 16H0Z" fill="${second}"/>` : '') +
    emblem(h, shade) +
    `<text x="64" y="71" text-anchor="middle" font-family="sans-serif" font-size="28" font-weight="700" fill="#ffffff">${escapeXml(initials(creature.name))}</text>` +
    `<text x="64" y="120" text-anchor="middle" font-family="sans-serif" font-size="13" fill="#ffffff" stroke="#000000" stroke-opacity="0.35" stroke-width="2" paint-order="stroke">${label}</text>` +
    `</svg>`
  );
}
