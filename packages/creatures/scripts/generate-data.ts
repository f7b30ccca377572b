/**
 * Generates `data/creatures.json`: the 151 creatures of the first generation in the data model of the
 * original GraphQL creature tutorial, derived from the openly licensed `pokemongo-json-pokedex`
 * package (Apache-2.0, see `../NOTICE`).
 *
 * Run once by hand (`npm run generate-data -w @seed/creatures`); the output is committed. Derivations:
 * - `weight`/`height`: the game's mean value ±12.5 % (the game's size variance) rounded to 2 decimals, as strings with a unit
 *   (`"5.25kg"`, `"0.35m"`), like the tutorial's data.
 * - `resistant`/`weaknesses`: attacking types whose combined multiplier against the creature's types is
 *   below/above 1, from the game's type chart.
 * - `maxHP`: `floor((baseStamina + 15) × 0.7903)`, the game's hit points at level 40 with perfect IVs.
 * - `fleeRate`: the game's base flee rate (null where the game has none); `maxCP`: the game's value.
 * - `evolutions`/`previousEvolutions`: every later/earlier stage within ids 001..151, nearest first for
 *   evolutions and earliest first for previous evolutions; `evolutionRequirements`: candy to evolve.
 */

import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);

interface Named {
  id: string;
  name: string;
}
interface Branch extends Named {
  pastBranch?: Branch;
  costToEvolve?: { candyCost?: number };
}
interface SourceCreature {
  dex: number;
  id: string;
  name: string;
  height: number;
  weight: number;
  maxCP: number;
  stats: { baseStamina: number };
  types: Named[];
  quickMoves: Named[];
  cinematicMoves: Named[];
  family: Named;
  encounter: { baseFleeRate?: number };
  evolution: {
    pastBranch?: Branch;
    futureBranches?: Branch[];
    costToEvolve?: { candyCost?: number };
  };
}
interface SourceMove {
  id: string;
  name: string;
  power?: number;
  pokemonType: Named;
}
interface SourceType {
  id: string;
  name: string;
  damage: { id: string; attackScalar: number }[];
}

const source: SourceCreature[] = require('pokemongo-json-pokedex/output/pokemon.json');
const moves: SourceMove[] = require('pokemongo-json-pokedex/output/move.json');
const types: SourceType[] = require('pokemongo-json-pokedex/output/type.json');
const locale: Record<
  string,
  { name: string; category: string }
> = require('pokemongo-json-pokedex/output/locales/en-US/pokemon.json');

const LAST_ID = 151;
const byGameId = new Map<string, SourceCreature>();
for (const c of source) {
  if (c.dex >= 1 && c.dex <= LAST_ID && !c.id.endsWith('_ALOLA') && !byGameId.has(c.id))
    byGameId.set(c.id, c);
}
const moveById = new Map(moves.map((m) => [m.id, m]));
const typeById = new Map(types.map((t) => [t.id, t]));

const pad = (dex: number) => String(dex).padStart(3, '0');
const round = (n: number) => Math.round(n * 100) / 100;
const displayName = (c: SourceCreature) => locale[c.id]?.name ?? c.name;
const ref = (gameId: string): { id: string; name: string } | undefined => {
  const c = byGameId.get(gameId);
  return c ? { id: pad(c.dex), name: displayName(c) } : undefined;
};

function attack(move: Named) {
  const m = moveById.get(move.id);
  if (!m) throw new Error(`unknown move ${move.id}`);
  return { name: m.name.replace(/ Fast$/, ''), type: m.pokemonType.name, damage: m.power ?? 0 };
}

function multiplierAgainst(attackingType: SourceType, defending: Named[]): number {
  let m = 1;
  for (const d of defending) m *= attackingType.damage.find((x) => x.id === d.id)?.attackScalar ?? 1;
  return m;
}

function laterStages(c: SourceCreature): { id: string; name: string }[] {
  const out: { id: string; name: string }[] = [];
  let frontier = c.evolution.futureBranches ?? [];
  while (frontier.length > 0) {
    const next: Branch[] = [];
    for (const b of frontier) {
      const r = ref(b.id);
      if (!r) continue;
      out.push(r);
      next.push(...(byGameId.get(b.id)?.evolution.futureBranches ?? []));
    }
    frontier = next;
  }
  return out;
}

function earlierStages(c: SourceCreature): { id: string; name: string }[] {
  const out: { id: string; name: string }[] = [];
  for (let b = c.evolution.pastBranch; b; b = b.pastBranch) {
    const r = ref(b.id);
    if (r) out.unshift(r);
  }
  return out;
}

const creatures = [...byGameId.values()]
  .sort((a, b) => a.dex - b.dex)
  .map((c) => {
    const defending = c.types;
    const chart = [...typeById.values()];
    const candy = c.evolution.futureBranches?.[0]?.costToEvolve?.candyCost;
    const familyName = ref(c.family.id.replace(/^FAMILY_/, ''))?.name ?? c.family.name;
    return {
      id: pad(c.dex),
      name: displayName(c),
      classification: locale[c.id]?.category ?? '',
      types: c.types.map((t) => t.name),
      resistant: chart.filter((t) => multiplierAgainst(t, defending) < 1).map((t) => t.name),
      weaknesses: chart.filter((t) => multiplierAgainst(t, defending) > 1).map((t) => t.name),
      weight: { minimum: `${round(c.weight * 0.875)}kg`, maximum: `${round(c.weight * 1.125)}kg` },
      height: { minimum: `${round(c.height * 0.875)}m`, maximum: `${round(c.height * 1.125)}m` },
      fleeRate: c.encounter.baseFleeRate ?? null,
      maxCP: c.maxCP,
      maxHP: Math.floor((c.stats.baseStamina + 15) * 0.7903),
      attacks: { fast: c.quickMoves.map(attack), special: c.cinematicMoves.map(attack) },
      evolutions: laterStages(c),
      evolutionRequirements:
        candy !== undefined && laterStages(c).length > 0
          ? { amount: candy, name: `${familyName} candies` }
          : null,
      previousEvolutions: earlierStages(c),
    };
  });

if (creatures.length !== LAST_ID) throw new Error(`expected ${LAST_ID} creatures, got ${creatures.length}`);
const out = join(import.meta.dirname, '..', 'data', 'creatures.json');
writeFileSync(out, `${JSON.stringify(creatures, null, 2)}\n`);
console.log(`wrote ${creatures.length} creatures to ${out}`);
