/**
 * A creature's picture: the SVG the server draws from the creature's data (`Creature.image`, a path on the
 * same server, so it works offline), or, while there is none, a badge drawn here from the creature's first
 * type and initial. Decorative: the creature's name is always next to it, so it has empty alt text.
 */
import type { CreatureSummary } from './graphql.ts';

/** Props of {@link CreaturePicture}. */
export interface CreaturePictureProps {
  creature: Pick<CreatureSummary, 'name' | 'types'> & { image?: string | null };
  /** Rendered size in CSS pixels (square). */
  size: number;
}

/** The picture of a creature at `size`×`size` CSS pixels. */
export function CreaturePicture({ creature, size }: CreaturePictureProps) {
  if (creature.image) {
    return <img className="picture" src={creature.image} alt="" width={size} height={size} loading="lazy" />;
  }
  const type = (creature.types[0] ?? 'normal').toLowerCase();
  return (
    <span
      className={`picture monogram type-${type}`}
      aria-hidden="true"
      data-size={size >= 96 ? 'large' : 'small'}
    >
      {creature.name.slice(0, 1).toUpperCase()}
    </span>
  );
}
