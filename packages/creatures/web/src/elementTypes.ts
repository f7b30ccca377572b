/** The elemental types a creature or attack can have, in the order the forms offer them. */
export const ELEMENT_TYPES = [
  'Normal',
  'Fire',
  'Water',
  'Grass',
  'Electric',
  'Ice',
  'Fighting',
  'Poison',
  'Ground',
  'Flying',
  'Psychic',
  'Bug',
  'Rock',
  'Ghost',
  'Dragon',
  'Dark',
  'Steel',
  'Fairy',
] as const;

/** {@link ELEMENT_TYPES} plus any other type in `seen` (data may hold more), without duplicates. */
export function typeChoices(seen: Iterable<string>): string[] {
  const all: string[] = [...ELEMENT_TYPES];
  for (const t of seen) if (!all.some((a) => a.toLowerCase() === t.toLowerCase())) all.push(t);
  return all;
}
